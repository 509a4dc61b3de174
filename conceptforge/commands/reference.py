"""The command reference, read from the argparse parsers themselves, and a check of documented commands.

Why from the parsers: a hand-copied list of flags drifts from the code the first time a flag is
renamed. The documentation site (``mkdocs.yml``, ``docs/hooks.py``) renders :func:`reference_markdown`
at build time and runs :func:`unknown_commands` over every fenced shell block, so a page that shows
``conceptforge SUBCOMMAND --flag`` the parser does not know fails the strict build.

Sub-parsers are lazy (:class:`~conceptforge.commands.base.LazySubParsersAction`): the tree is
filled once by :func:`~conceptforge.commands.base.walk_parsers`, which imports every sub-command's
module. That is fine for a docs build and never happens on the command line.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from conceptforge.commands.base import walk_parsers

#: Where a shell command line ends: what follows is another command or a redirection.
_STOPS = {"|", "||", "&&", ";", "&", ">", ">>", "2>", "2>&1", "<"}
#: ``conceptforge`` as a command: at the start of a line or after a shell operator, possibly as a path.
_COMMAND_WORD = re.compile(r"(?:^|(?<=[\s;&|(`]))(?:[\w./-]*/)?conceptforge(?=\s|$)")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_SHELL_LANGS = {"", "bash", "sh", "shell", "console", "text"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's sub-commands (filled already: the callers walk the tree once first)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action._name_parser_map)
    return found


def filled_parser() -> argparse.ArgumentParser:
    """The whole ``conceptforge`` parser tree with every lazy sub-parser filled."""
    from conceptforge.commands import build_parser

    parser = build_parser()
    for _ in walk_parsers(parser):
        pass
    return parser


def _help_text(action: argparse.Action) -> str:
    text = (action.help or "").replace("\n", " ")
    if "%(" in text:  # argparse's own placeholders (%(default)s)
        try:
            text = text % {**vars(action), "prog": ""}
        except (KeyError, TypeError, ValueError):
            pass
    return _cell(text)


def _cell(text: str) -> str:
    """Text safe in a markdown table cell: no column break, no ``<stem>`` taken for an HTML tag."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _option_cell(action: argparse.Action) -> str:
    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.nargs != 0 and action.option_strings:
        metavar = action.metavar or (
            "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
        )
        names += f" `{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    return names


def reference_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The command reference page: one section per (sub-)command, its options as a table."""
    parser = parser or filled_parser()
    lines = [
        "# Command reference",
        "",
        "Generated from the `conceptforge` argument parsers when the site is built "
        "(`conceptforge/commands/reference.py`), so it lists exactly what `conceptforge … --help` accepts.",
        "",
    ]
    for path, sub in walk_parsers(parser):
        title = " ".join(("conceptforge", *path))
        lines += [f"{'#' * min(len(path) + 1, 4)} `{title}`", ""]
        if sub.description:
            lines += [sub.description.strip(), ""]
        commands = _subparsers(sub)
        if commands:
            helps = {a.dest: a.help for a in _choices_actions(sub)}
            lines += ["| command | what it does |", "| --- | --- |"]
            lines += [
                f"| `{title} {name}` | {(helps.get(name) or '').replace('|', chr(92) + '|')} |" for name in commands
            ]
            lines.append("")
        rows = [
            a
            for a in sub._actions
            if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction)) and a.help != argparse.SUPPRESS
        ]
        if rows:
            lines += ["| option | what it does | default |", "| --- | --- | --- |"]
            for action in rows:
                default = action.default
                hidden = default is None or default is False or default == argparse.SUPPRESS  # 0 is shown
                shown = "" if hidden or not action.option_strings else f"`{default}`"
                lines.append(f"| {_option_cell(action)} | {_help_text(action)} | {shown} |")
            lines.append("")
    return "\n".join(lines)


def _choices_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action._choices_actions)
    return []


@dataclass(frozen=True)
class UnknownCommand:
    """A documented command line the parsers do not accept: where it is and what is unknown."""

    line: int
    command: str
    problem: str


def fenced_shell_lines(markdown: str) -> Iterator[tuple[int, str]]:
    """(line number, logical line) of every fenced shell block; ``\\`` continuations joined."""
    fence: str | None = None
    shell = False
    pending, start = "", 0
    for number, line in enumerate(markdown.splitlines(), 1):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence, shell = match.group(2), match.group(3).lower() in _SHELL_LANGS
            continue
        if match and match.group(2).startswith(fence[0]) and len(match.group(2)) >= len(fence) and not match.group(3):
            fence = None
            continue
        if not shell:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def _tokens(text: str) -> list[str]:
    # a comment: after " #", or prose aligned after three spaces or more (usage tables in blocks)
    text = re.split(r" #|\s{3,}(?=[^\s-])", text, maxsplit=1)[0]
    try:
        return shlex.split(text, comments=False)
    except ValueError:  # an unbalanced quote in prose-like text: split plainly
        return text.split()


def check_command(parser: argparse.ArgumentParser, tokens: list[str]) -> str | None:
    """What the parsers do not know in ``conceptforge`` + ``tokens``, or None (``parser``: a
    :func:`filled_parser`).

    Sub-commands are followed down; every ``--flag`` must be an option of the command reached or
    of one above it. Values and positionals are not checked (docs use placeholders for them)."""
    chain = [parser]
    path = ["conceptforge"]
    values = 0  # how many of the next tokens are the value of the flag before them
    for token in tokens:
        if token in _STOPS or token.startswith(("#", ">", "2>", "|")) or "`" in token:
            break  # another command, a redirection, or prose around an inline command
        if values:
            values -= 1
            continue
        if token.startswith("[") and token.lstrip("[").startswith("-"):
            token = token.strip("[]")  # an optional flag in a usage line: [--push-results]
        if token.startswith("--"):
            flag, _, value = token.partition("=")
            if flag == "--":
                break
            action = next((p._option_string_actions[flag] for p in chain if flag in p._option_string_actions), None)
            if action is None:
                return f"{' '.join(path)} has no option {flag}"
            if not value and action.nargs is None or action.nargs == "?" and not value:
                values = 1 if action.nargs is None else 0
            continue
        commands = _subparsers(chain[-1])
        if commands and not token.startswith("-"):
            if token not in commands:
                if token.startswith(("<", "$", "{")) or token.isupper() or "…" in token or token == "...":
                    return None  # a placeholder for the sub-command
                return f"{' '.join(path)} has no sub-command {token!r}"
            chain.append(commands[token])
            path.append(token)
        # anything else: a value or a positional
    return None


def unknown_commands(markdown: str, parser: argparse.ArgumentParser | None = None) -> list[UnknownCommand]:
    """Every ``conceptforge …`` line in the fenced shell blocks of ``markdown`` the parsers refuse."""
    parser = parser or filled_parser()
    found = []
    for number, line in fenced_shell_lines(markdown):
        for match in _COMMAND_WORD.finditer(line):
            rest = line[match.end() :]
            if rest.lstrip().startswith(("-", "=")) and rest.lstrip()[:2] != "--":
                continue
            problem = check_command(parser, _tokens(rest))
            if problem:
                found.append(UnknownCommand(number, ("conceptforge" + rest).strip(), problem))
    return found
