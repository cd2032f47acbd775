"""The cyclic collector paused while a report is read, priced and written (output/collection.py):
off within, as it was after, also when the call fails, and a report's entry points leave it so."""

from __future__ import annotations

import gc

import pytest

from tpubench.output.collection import collection_paused, paused_collection


@pytest.fixture(autouse=True)
def _collector_restored():
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_paused_within_and_restored_after_even_on_an_error():
    gc.enable()
    with collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert paused_collection(gc.isenabled)() is False and gc.isenabled()
    with pytest.raises(ValueError), collection_paused():
        raise ValueError("the report failed")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off_and_pauses_nest():
    gc.disable()
    with collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
    gc.enable()
    with collection_paused(), collection_paused():
        pass
    assert gc.isenabled()


def test_the_report_entry_points_run_paused_and_leave_it_as_it_was(tmp_path, monkeypatch):
    from helpers_synthetic import write_results

    from tpubench.output.frames import load_results
    from tpubench.output.report import build_report, markdown, render

    write_results(tmp_path, [dict(seed=1), dict(seed=2, batch_size=4)])
    seen = {}
    gc.enable()
    results = load_results(tmp_path, meanwhile=lambda: seen.setdefault("load_results", gc.isenabled()))

    def estimator(*args, **kwargs):
        seen["build_report"] = gc.isenabled()

    data = build_report(tmp_path, results=results, estimator=estimator)
    drawn = markdown.render_markdown
    monkeypatch.setattr(markdown, "render_markdown",
                        lambda *a, **k: seen.setdefault("render", gc.isenabled()) or drawn(*a, **k))
    assert render(data, "md")
    assert seen == {"load_results": False, "build_report": False, "render": False} and gc.isenabled()
