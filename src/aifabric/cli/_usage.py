"""How every command's help page looks and how bad usage is refused.

Help pages: one placeholder style. A flag shows none (no ``<bool>``); an argument is its
name in capitals (``SCENARIO``, ``SPEC...``; ``[TARGET]`` when optional); an option shows
its declared metavar (``N``, ``SIZE``, ``DIR``, ``FILE``), its choices (``[csv|parquet]``;
a list too long for the column is named by the option and spelled out in its help, so
that no choice is ever cut at the end of a line), else a plain word for its type.

Bad usage (a bad choice or number, a missing option or argument, an extra argument, an
unknown option or command) is one :class:`~aifabric.errors.Problem` naming the option and
what is allowed, printed like every other bad input (``error: ...``, exit 2).

Only typer is imported here: ``aifabric --help`` stays fast.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from typer._click.exceptions import (
    BadOptionUsage,
    BadParameter,
    MissingParameter,
    NoArgsIsHelpError,
    NoSuchOption,
    UsageError,
)
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from aifabric.errors import Problem, SpecError

__all__ = ["HelpCommand", "HelpGroup", "UsageError", "adopt", "one_line", "refuse_usage", "tidy"]

#: a list of choices longer than this is spelled out in the option's help instead
CHOICES_WIDTH = 24


class _Option(TyperOption):
    """An option whose help shows its metavar (never a type name such as ``<str>``)."""

    __slots__ = ()

    def display_type_rich(self, ctx: Any) -> str | None:
        return self.metavar


class _Argument(TyperArgument):
    """An argument: its name column says it all (``SCENARIO``), no type column."""

    __slots__ = ()

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _choices(param: Any) -> list[str]:
    desc = getattr(param, "type_descriptor", None)
    if desc is None or not desc.is_choice:
        return []
    return [str(c.value if isinstance(c, Enum) else c) for c in desc.choices or ()]


def _type_word(param: Any) -> str:
    desc = param.type_descriptor
    if desc.is_path:
        return "PATH"
    ann = desc.annotation
    return {int: "N", float: "NUMBER"}.get(ann, "TEXT") if isinstance(ann, type) else "TEXT"


def tidy(param: Any) -> None:
    """Give ``param`` the project's placeholder (idempotent)."""
    if isinstance(param, TyperOption):
        if type(param) is TyperOption:
            param.__class__ = _Option
        if param.is_flag or param.count:
            param.metavar = ""
            return
        if param.metavar is not None:
            return
        choices = _choices(param)
        text = "|".join(choices)
        if choices and len(text) + 2 <= CHOICES_WIDTH:
            param.metavar = f"[{text}]"
        elif choices:
            param.metavar = (param.name or "value").upper()
            param.help = f"{param.help or ''}; one of: {', '.join(choices)}".lstrip("; ")
        else:
            param.metavar = _type_word(param)
    elif isinstance(param, TyperArgument):
        if type(param) is TyperArgument:
            param.__class__ = _Argument
        if param.metavar is None:
            param.metavar = (param.name or "value").upper()


def _get_params(self: Any, ctx: Any, base: Any) -> list[Any]:
    params = base.get_params(self, ctx)
    for p in params:
        tidy(p)
    return params


def _usage_pieces(self: Any, ctx: Any) -> list[str]:
    """A plain usage line: ``aifabric simulate [OPTIONS] SCENARIO``, ``[TARGET]`` when
    optional, ``SPEC...`` when repeated."""
    pieces = [self.options_metavar] if self.options_metavar else []
    for p in self.get_params(ctx):
        if isinstance(p, TyperArgument) and not p.hidden:
            name = p.metavar.removesuffix("...")
            name = name if p.required else f"[{name}]"
            pieces.append(name + ("..." if p.nargs != 1 else ""))
    return pieces


class HelpCommand(TyperCommand):
    """A command with the project's help page (placeholders tidied, plain usage)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _get_params(self, ctx, TyperCommand)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage_pieces(self, ctx)


class HelpGroup(TyperGroup):
    """A command group with the project's help page."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _get_params(self, ctx, TyperGroup)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*_usage_pieces(self, ctx), self.subcommand_metavar]


def adopt(cmd: Any) -> Any:
    """``cmd`` and its subcommands as :class:`HelpCommand` / :class:`HelpGroup`: a plain
    typer command or group changes class in place (they add no state); a custom class
    (``sweep``'s) derives from them."""
    if type(cmd) is TyperCommand:
        cmd.__class__ = HelpCommand
    elif type(cmd) is TyperGroup:
        cmd.__class__ = HelpGroup
    for sub in getattr(cmd, "commands", {}).values():
        adopt(sub)
    return cmd


# ------------------------------------------------------------------------ bad usage
def _name(param: Any) -> str:
    if isinstance(param, TyperArgument):
        return (param.metavar or param.name or "argument").removesuffix("...")
    longs = [o for o in param.opts if o.startswith("--")]
    return (longs or param.opts or [param.name])[0]


def _allowed(param: Any) -> str:
    """What ``param`` takes, in words (``csv, parquet``; ``an integer, at least 0``)."""
    choices = _choices(param)
    if choices:
        return ", ".join(choices)
    desc = getattr(param, "type_descriptor", None)
    ann = getattr(desc, "annotation", None)
    kind = {int: "an integer", float: "a number"}.get(ann) if isinstance(ann, type) else None
    if kind is None:
        return f"{_name(param)} {param.metavar}" if isinstance(param, TyperOption) else ""
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    if lo is not None and hi is not None:
        return f"{kind} from {lo} to {hi}"
    if lo is not None:
        return f"{kind}, at least {lo}"
    if hi is not None:
        return f"{kind}, at most {hi}"
    return kind


#: how a refused choice names its kind (``unknown simulator 'quantum'``); else the
#: option's name
_WORDS = {"--sim": "simulator"}


def _clean(message: str) -> str:
    """A click/typer message as a clause: no ``Value error,`` prefix, no final stop,
    lower case first, one line."""
    msg = " ".join(str(message).split()).removeprefix("Value error, ").rstrip(".")
    return msg[:1].lower() + msg[1:] if msg[1:2].islower() or msg[1:2] == " " else msg


def _command_path(ctx: Any) -> str:
    """``aifabric sweep run``: the commands' own names (not how Python was started)."""
    names = []
    while ctx is not None:
        names.append(ctx.command.name or ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names)) or "aifabric"


def _usage(ctx: Any) -> str:
    if ctx is None:
        return "aifabric"
    pieces = ctx.command.collect_usage_pieces(ctx)
    return " ".join([_command_path(ctx), *pieces])


def _params_named(option: str, cmd: Any) -> list[Any]:
    """The options called ``option`` of ``cmd`` and the subcommands loaded under it."""
    if cmd is None:
        return []
    found = [p for p in getattr(cmd, "params", ()) if option in getattr(p, "opts", ())]
    loaded = getattr(getattr(cmd, "commands", None), "_loaded", None)
    subs = loaded if loaded is not None else getattr(cmd, "commands", {})
    for sub in subs.values():
        found += _params_named(option, sub)
    for p in found:
        tidy(p)
    return found


def one_line(e: UsageError, root: Any = None) -> Problem:
    """A click usage error as one problem: the option (or argument, or command) and
    what is allowed. ``root``: the command the error came through, where an option is
    looked up when click did not say which command it belongs to."""
    ctx = getattr(e, "ctx", None)
    cmd = _command_path(ctx)
    param = getattr(e, "param", None)
    if isinstance(e, MissingParameter) and param is not None:
        if isinstance(param, TyperArgument):
            return Problem(_name(param), f"missing; usage: {_usage(ctx)}")
        return Problem(_name(param), f"missing; allowed: {_name(param)} {param.metavar}")
    if isinstance(e, BadParameter):
        where = _name(param) if param is not None else cmd
        msg = _clean(e.message)
        m = re.match(r"'(.*)' is not one of ", msg)
        if m and param is not None:
            word = _WORDS.get(where, where.lstrip("-").replace("-", " "))
            return Problem(where, f"unknown {word} {m.group(1)!r}; allowed: "
                           f"{_allowed(param)}")
        allowed = _allowed(param) if param is not None else ""
        if allowed and "allowed" not in msg:
            msg += f"; allowed: {allowed}"
        return Problem(where, msg)
    if isinstance(e, NoSuchOption):
        hint = f"did you mean {' or '.join(sorted(e.possibilities))}?" if e.possibilities \
            else f"see {cmd} --help"
        return Problem(e.option_name, f"no such option of {cmd}; {hint}")
    if isinstance(e, BadOptionUsage):
        msg = _clean(e.message)
        if "requires an argument" in msg:
            metavars = {p.metavar for p in _params_named(e.option_name, root)}
            metavar = f" {metavars.pop()}" if len(metavars) == 1 else ""
            msg = f"needs a value; allowed: {e.option_name}{metavar}"
        return Problem(e.option_name, msg)
    msg = _clean(e.message)
    m = re.match(r"no such command '([^']*)'\.?(.*)", msg, re.I)
    if m and ctx is not None:
        names = list(ctx.command.list_commands(ctx))
        guess = f" {m.group(2).strip()}" if m.group(2).strip() else ""
        return Problem(cmd, f"no such command {m.group(1)!r};{guess} allowed: "
                       f"{', '.join(names)}")
    return Problem(cmd, f"{msg}; usage: {_usage(ctx)}")


def refuse_usage(e: UsageError, root: Any = None) -> SpecError | UsageError:
    """The error to raise for ``e``: a :class:`SpecError` (one line, exit 2), or ``e``
    itself when it is the help page shown for a group called without arguments."""
    if isinstance(e, NoArgsIsHelpError):
        return e
    return SpecError(one_line(e, root))
