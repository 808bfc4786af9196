"""Azure's command-line expressions: `${{inputs.x}}`, `${{outputs.y}}`, `${{search_space.z}}`,
`${{name}}`, the pipeline bindings `${{parent.inputs.x}}` / `${{parent.jobs.a.outputs.y}}`, and the
optional-argument form `$[[--flag ${{inputs.x}}]]`, which Azure drops whole when an optional input it
names is not given (reference-yaml-job-command, "Expressions").
"""
from __future__ import annotations

import re
from typing import Callable, List, Optional

EXPRESSION = re.compile(r"\$\{\{\s*([^{}]*?)\s*\}\}")
OPTIONAL = re.compile(r"\$\[\[(.*?)\]\]", re.S)
#: A shell parameter in braces: OmegaConf would read `${HOME}` as one of its own interpolations.
SHELL_BRACES = re.compile(r"(?<!\\)\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
LEFT_BRACES = re.compile(r"(?<!\\)\$\{(?!\{)")
BINDING = re.compile(r"^\s*\$\{\{\s*parent\.(.+?)\s*\}\}\s*$")


class UnknownReference(ValueError):
    """An expression names something the job does not have."""


def references(text: str) -> List[str]:
    return [m.group(1) for m in EXPRESSION.finditer(text)]


def binding(value: object) -> Optional[str]:
    """`parent.inputs.x` for a value that is exactly `${{parent.inputs.x}}`, else None."""
    if not isinstance(value, str):
        return None
    match = BINDING.match(value)
    return match.group(1) if match else None


def render(command: str, resolve: Callable[[str], Optional[str]]) -> str:
    """The command with every expression replaced. `resolve(ref)` returns the text for a reference,
    None for an optional input that was not given, and raises UnknownReference for a name the job lacks.
    An optional block naming an input that is not given disappears; elsewhere such an input is an error
    (Azure: an optional input may only be used inside `$[[...]]`)."""

    def block(match: re.Match[str]) -> str:
        inner = match.group(1)
        values = [resolve(ref) for ref in references(inner)]
        if any(v is None for v in values):
            return ""
        return _replace(inner, resolve)

    return _replace(OPTIONAL.sub(block, command), resolve)


def _replace(text: str, resolve: Callable[[str], Optional[str]]) -> str:
    def one(match: re.Match[str]) -> str:
        value = resolve(match.group(1))
        if value is None:
            raise UnknownReference(f"${{{{{match.group(1)}}}}} is an optional input that was not given; use it "
                                   f"inside $[[...]] so that Azure and mltrain can leave the argument out")
        return value

    return EXPRESSION.sub(one, text)


def shell_safe(command: str) -> str:
    """`${NAME}` written for the shell becomes `$NAME` (or `"$NAME"` before a name character), which
    the shell reads the same way and OmegaConf leaves alone. Other `${...}` forms cannot pass through
    mltrain's config and raise UnknownReference. Run it before render(): Azure's own `${{...}}` pass."""

    def one(match: re.Match[str]) -> str:
        end = match.end()
        follows = command[end:end + 1]
        name = match.group(1)
        return f'"${name}"' if follows and (follows.isalnum() or follows == "_") else f"${name}"

    out = SHELL_BRACES.sub(one, command)
    left = LEFT_BRACES.search(out)
    if left:
        bad = out[left.start():].split()[0]
        raise UnknownReference(f"'{bad}': a shell expansion in braces other than ${{NAME}} is not supported by "
                               "mltrain; write it in a script the command runs")
    return out
