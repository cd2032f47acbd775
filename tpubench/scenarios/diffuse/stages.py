"""One pipeline call cut into fenced stages: text encoders, preparation, each denoising step, VAE
decode and post-processing, whose times sum to the whole call.

Every mark reads the same fenced clock (measure.timing.fenced_clock: the backend's synchronize,
then perf_counter), and the stages are the gaps between consecutive marks, so they add up to the
call's time exactly (up to float rounding). The marks come from the pipeline itself:
`encode_prompt` and `vae.decode` are wrapped on the instance, the start of the first denoising
step is a forward pre-hook on the denoiser (outside a compiled forward), and the end of every step
is Diffusers' `callback_on_step_end`. The same hooks take the numerics: the denoiser's first
output of the call (the first step's noise prediction) and the latents after the last step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STAGES = ("text_encode", "prepare", "denoise", "vae_decode", "postprocess")


@dataclass
class CallTimes:
    """The stages of one call, in seconds (the whole call's images, not per image)."""

    whole_s: float
    text_encode_s: float
    prepare_s: float
    step_s: list[float]
    vae_decode_s: float
    postprocess_s: float

    @property
    def denoise_s(self) -> float:
        return sum(self.step_s)

    def stage_sum_s(self) -> float:
        return self.text_encode_s + self.prepare_s + self.denoise_s + self.vae_decode_s + self.postprocess_s


def stages_from_marks(marks: dict) -> CallTimes:
    """CallTimes from one call's marks: start, encode_start, encode_end, first_step_start, step_end
    (one per step), decode_start, decode_end, end (seconds on one clock)."""
    ends = marks["step_end"]
    steps = [b - a for a, b in zip([marks["first_step_start"], *ends[:-1]], ends)]
    return CallTimes(
        whole_s=marks["end"] - marks["start"],
        text_encode_s=marks["encode_end"] - marks["encode_start"],
        prepare_s=(marks["encode_start"] - marks["start"]) + (marks["first_step_start"] - marks["encode_end"]),
        step_s=steps,
        vae_decode_s=marks["decode_end"] - marks["decode_start"],
        postprocess_s=(marks["decode_start"] - ends[-1]) + (marks["end"] - marks["decode_end"]))


@dataclass
class StagedPipeline:
    """A pipeline whose calls are cut into stages (`call` returns CallTimes). `capture` turns on
    keeping the first step's noise prediction and the final latents of the next call."""

    pipe: object
    denoiser: str
    now: object                      # the fenced clock
    capture: bool = False
    captured: dict = field(default_factory=dict)
    _marks: dict = field(default_factory=dict)

    def __post_init__(self):
        pipe, marks = self.pipe, self._marks
        encode, decode = pipe.encode_prompt, pipe.vae.decode

        def timed_encode(*args, **kwargs):
            marks["encode_start"] = self.now()
            out = encode(*args, **kwargs)
            marks["encode_end"] = self.now()
            return out

        def timed_decode(*args, **kwargs):
            marks["decode_start"] = self.now()
            out = decode(*args, **kwargs)
            marks["decode_end"] = self.now()
            return out

        def before_step(module, args, kwargs):
            if "first_step_start" not in marks:
                marks["first_step_start"] = self.now()
            if self.capture and "denoiser_inputs" not in self.captured:
                # The first step's inputs, for counting a step's FLOPs after the timed calls.
                self.captured["denoiser_inputs"] = (args, dict(kwargs))

        def after_forward(module, args, kwargs, output):
            if self.capture and "noise_pred" not in self.captured:
                out = output[0] if isinstance(output, (tuple, list)) else getattr(output, "sample", output)
                self.captured["noise_pred"] = out.detach().float().cpu()

        pipe.encode_prompt, pipe.vae.decode = timed_encode, timed_decode
        module = getattr(pipe, self.denoiser)
        self._hooks = [module.register_forward_pre_hook(before_step, with_kwargs=True),
                       module.register_forward_hook(after_forward, with_kwargs=True)]

    def _step_end(self, pipe, i, t, kwargs):
        self._marks.setdefault("step_end", []).append(self.now())
        if self.capture and i == pipe._num_timesteps - 1 and "latents" in kwargs:
            self.captured["latents"] = kwargs["latents"].detach().float().cpu()
        return kwargs

    def call(self, **kwargs) -> tuple[CallTimes, object]:
        self._marks.clear()
        self._marks["start"] = self.now()
        out = self.pipe(**kwargs, callback_on_step_end=self._step_end, output_type="np", return_dict=False)
        self._marks["end"] = self.now()
        return stages_from_marks(self._marks), out[0]

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        for name in ("encode_prompt",):
            self.pipe.__dict__.pop(name, None)
        self.pipe.vae.__dict__.pop("decode", None)
