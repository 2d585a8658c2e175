"""The ``trainfix`` console script. The most common call, ``trainfix diagnose [FILE|-] [options]``, runs
without importing Typer, Rich or the other commands (a recognised error is answered in a fraction of a
second); any other command, ``--help`` or an option this parser does not know goes to the Typer app
(:mod:`app.cli`), which gives the same answer with its usual help and error messages.
"""

from __future__ import annotations

import gc
import os
import sys

RETRIEVAL = ("auto", "always", "never")


def parse_answers(pairs: list[str]) -> dict[str, str]:
    """``--answer id=value`` options as a dict; a malformed one is an :class:`InputError`."""
    from assistant.errors import InputError

    answers: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--answer expects id=value (e.g. precision=bf16), got {pair!r}")
        answers[key.strip()] = value.strip()
    return answers


def parse_diagnose(args: list[str]) -> dict | None:
    """The options of ``trainfix diagnose``, or ``None`` for anything Typer should handle (help, a typo)."""
    out: dict = {"file": "-", "as_json": False, "answer": [], "lang": None, "retrieval": "auto", "plain": False}
    files: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if arg in ("--json", "--plain"):
            out["as_json" if arg == "--json" else "plain"] = True
        elif name in ("--answer", "-a", "--lang", "--retrieval"):
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                return None
            if name in ("--answer", "-a"):
                out["answer"].append(value)
            elif name == "--lang":
                out["lang"] = value
            elif value in RETRIEVAL:
                out["retrieval"] = value
            else:
                return None
        elif arg == "-" or not arg.startswith("-"):
            files.append(arg)
        else:
            return None
        i += 1
    if len(files) > 1:
        return None
    if files:
        out["file"] = files[0]
    return out


def print_diagnosis(diagnosis, as_json: bool, plain: bool) -> None:
    """Print a Diagnosis: JSON, Markdown source, or formatted Markdown on a terminal."""
    if as_json:
        _echo(diagnosis.model_dump_json(indent=2))
        return
    from app.render import markdown

    text = markdown(diagnosis)
    if plain or not sys.stdout.isatty():
        _echo(text)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console().print(Markdown(text))


def run_diagnose(file: str = "-", as_json: bool = False, answer: list[str] | None = None, lang: str | None = None,
                 retrieval: str = "auto", plain: bool = False) -> None:
    """``trainfix diagnose``: read the file (or stdin), diagnose it, print the answer."""
    from assistant.errors import InputError

    if lang not in (None, "zh", "en"):
        raise InputError(f"--lang must be zh or en, got {lang!r}")
    answers = parse_answers(answer or [])
    from assistant.api import Assistant

    assistant = Assistant(retrieval=retrieval)
    # What is loaded now (modules, the knowledge base, the rules) lives until exit: kept out of the collector's
    # scans, which otherwise walk all of it whenever the diagnosis allocates (a third of a short answer's time).
    gc.freeze()
    gc.enable()
    if file == "-":
        if sys.stdin.isatty():
            print("reading from stdin (paste, then Ctrl-D)…", file=sys.stderr)
        data = sys.stdin.buffer.read()
        if not data.strip():
            raise InputError("no input: pass a file (trainfix diagnose train.log) or pipe text into it")
        diagnosis = assistant.diagnose(data, answers=answers, lang=lang)
    else:
        diagnosis = assistant.diagnose_file(file, answers=answers, lang=lang)
    print_diagnosis(diagnosis, as_json, plain)


def _echo(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def main() -> None:
    """Console-script entry point."""
    # pydantic looks for plugins in the metadata of every installed distribution when it builds its first
    # model (~0.1 s in a full environment); trainfix uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args = sys.argv[1:]
    options = parse_diagnose(args[1:]) if args[:1] == ["diagnose"] else None
    if options is None:
        from app.cli import main as typer_main

        typer_main()
        return
    # A one-shot process: no collection while the modules and the knowledge base load (unpickling allocates
    # hundreds of thousands of objects, none of them garbage); run_diagnose turns the collector back on.
    gc.disable()
    from assistant.errors import TrainfixError

    try:
        run_diagnose(**options)
    except TrainfixError as err:
        message = f"trainfix: {err}"
        if sys.stderr.isatty():
            message = f"\x1b[31m{message}\x1b[0m"
        print(message, file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("trainfix: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
