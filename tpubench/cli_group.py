"""The `tpubench` click group, converted from typer one command at a time (issue 34).

Typer turns every command of an app, and of its sub-apps (`tpubench pricing ...`), into a click
command (each parameter's annotation inspected, its converters made) before it parses the command
line: ~15 ms for tpubench's commands, paid by `tpubench validate` for the one it runs. Here each
group is made without its commands, and a command (or sub-group) is converted when click first
looks it up by name: the one invoked, or all of a group's for its --help (which lists each with
its one-line help). The conversion is typer's own (typer.main.get_command_from_info and
get_group_from_info), so parameters, help and errors are typer's. A DeferredTyper's commands are
made later still, when its group is first looked into (`tpubench budget`'s, from the budget planners).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, MutableMapping

import typer
import typer.main


class CommandsOnDemand(MutableMapping):
    """A group's commands by name, in the order given; each built by `build(entry)` on first look-up.
    `entries` may be a function making them, called on first use (a DeferredTyper's commands)."""

    def __init__(self, entries: dict[str, object] | Callable[[], dict[str, object]], build: Callable):
        self._source = entries if callable(entries) else dict(entries)
        self._build = build
        self._built: dict = {}

    @property
    def _entries(self) -> dict[str, object]:
        if callable(self._source):
            self._source = dict(self._source())
        return self._source

    def __getitem__(self, name: str):
        if name not in self._built:
            self._built[name] = self._build(self._entries[name])   # KeyError: no such command
        return self._built[name]

    def __setitem__(self, name: str, command) -> None:
        self._entries.setdefault(name, None)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def lazy_group(app: typer.Typer):
    """`app`'s click group, as typer.main.get_group makes it, whose commands are built on demand."""
    return _group(typer.main.TyperInfo(app), app)


def _group(info, root: typer.Typer):
    """The group of `info` (the app, or a sub-app as add_typer registered it) without its commands,
    then a mapping that converts them, in typer's order: the commands, then the sub-groups."""
    instance = info.typer_instance
    groups = {typer.main.solve_typer_info_defaults(g).name: g for g in instance.registered_groups}
    if None in groups or "" in groups:
        # A sub-app added without a name has its commands merged into this group: typer's own way.
        return typer.main.get_group_from_info(info, pretty_exceptions_short=root.pretty_exceptions_short,
                                              rich_markup_mode=root.rich_markup_mode,
                                              suggest_commands=root.suggest_commands)
    bare = copy.copy(instance)   # the app's settings, help and callback, without what it holds
    bare.registered_commands, bare.registered_groups = [], []
    bare_info = copy.copy(info)
    bare_info.typer_instance = bare
    group = typer.main.get_group_from_info(bare_info, pretty_exceptions_short=root.pretty_exceptions_short,
                                           rich_markup_mode=root.rich_markup_mode,
                                           suggest_commands=root.suggest_commands)

    def build(entry):
        if isinstance(entry, typer.main.TyperInfo):
            return _group(entry, root)
        return typer.main.get_command_from_info(entry, pretty_exceptions_short=root.pretty_exceptions_short,
                                                rich_markup_mode=root.rich_markup_mode)

    def entries() -> dict:   # read when the group is first looked into: a DeferredTyper makes its commands then
        commands = {c.name or typer.main.get_command_name(c.callback.__name__): c
                    for c in instance.registered_commands}
        return {**commands, **groups}

    group.commands = CommandsOnDemand(entries, build)
    return group


class DeferredTyper(typer.Typer):
    """A Typer whose commands are made by `make_commands()` (a list of typer.models.CommandInfo) when
    read: a group whose commands come from a table read only when the group is used
    (`tpubench budget`'s, one per budget planner, cli_budget.py), not at start-up nor for
    `tpubench --help`. typer's own conversion (typer.main.get_command) reads them as any Typer's."""

    def __init__(self, make_commands: Callable[[], list], **kwargs):
        super().__init__(**kwargs)       # sets registered_commands to [] (the setter below)
        self._make_commands = make_commands

    @property
    def registered_commands(self) -> list:
        # Made on each read (typer and cli_group read them once per group they build): a table that
        # grows, as the scenario registry does in a test, is read as it is now.
        return list(self._make_commands()) if self._make_commands is not None else self._commands

    @registered_commands.setter
    def registered_commands(self, commands: list) -> None:
        # Set by typer's __init__, or on the bare copy cli_group makes: these commands, made already.
        self._commands, self._make_commands = commands, None


class LazyTyper(typer.Typer):
    """A Typer that, called, runs the lazy group. typer.main.get_command(app) still converts every
    command at once (for tests that build the click command once and reuse it)."""

    def __call__(self, *args, **kwargs):
        # typer's own __call__ also installs its exception hook, which for an app without pretty
        # exceptions (tpubench's) hands every exception to Python's hook unchanged: nothing lost.
        return lazy_group(self)(*args, **kwargs)
