"""Runs every example in examples/ at a small budget and writes the gallery's pages.

Each `examples/NAME.py` runs in an empty directory with `--num-updates 200` (fewer for
the slow ones, listed in `NUM_UPDATES`). The page
`docs/gallery/NAME.md` shows its docstring, what it printed, the pictures it saved
(`.png` figures, then `.gif` videos, moved next to the page) and its source;
`docs/gallery/index.md` lists the examples. The pages are build outputs (git ignores
`docs/gallery/`): `nox -s docs` writes them before building the site. An example that
fails stops the build.

    python docs/gen_gallery.py
"""

import ast
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time


ROOT = pathlib.Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
GALLERY = ROOT / "docs" / "gallery"
# Updates per example: 200, or fewer where 200 would take minutes on a 2-core CPU.
NUM_UPDATES = {"ray_pong": 50, "craftax_classic": 20}
DEFAULT_NUM_UPDATES = 200
PICTURES = ("*.png", "*.gif")


def run_example(script: pathlib.Path, num_updates: int) -> tuple[str, list[pathlib.Path], float]:
    """Runs one example in an empty directory; returns its output, the pictures it saved
    (moved into the gallery) and its wall-clock seconds."""
    with tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        completed = subprocess.run(
            [sys.executable, str(script), "--num-updates", str(num_updates)],
            cwd=workdir,
            env=os.environ | {"MPLBACKEND": "Agg"},
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - start
        if completed.returncode != 0:
            sys.exit(f"{script.name} failed (exit status {completed.returncode}); its output:\n{completed.stdout}")
        pictures = [p for pattern in PICTURES for p in sorted(pathlib.Path(workdir).glob(pattern))]
        return completed.stdout, [pathlib.Path(shutil.move(p, GALLERY / p.name)) for p in pictures], seconds


def example_page(
    script: pathlib.Path, num_updates: int, output: str, pictures: list[pathlib.Path], seconds: float
) -> str:
    """The gallery page of one example, in Markdown."""
    source = script.read_text()
    docstring = ast.get_docstring(ast.parse(source)) or ""
    lines = [
        f"# {script.name}",
        "",
        docstring,
        "",
        "## Output",
        "",
        f"`python examples/{script.name} --num-updates {num_updates}`, run when this site was built "
        f"({os.cpu_count()} CPU cores, {seconds:.0f} s):",
        "",
        "```text",
        output.rstrip(),
        "```",
        "",
        *(f"![{picture.name}]({picture.name})\n" for picture in pictures),
        "## Source",
        "",
        "```python",
        source.rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def index_page(summaries: list[tuple[pathlib.Path, list[pathlib.Path]]]) -> str:
    """The gallery's index: each example's first docstring line and its first picture."""
    lines = [
        "# Gallery",
        "",
        "Every script in `examples/`, run with a small `--num-updates` each time this site is",
        "built: what it printed and the pictures it saved. The command in each docstring gives",
        "a budget that solves the task.",
        "",
    ]
    for script, pictures in summaries:
        summary = (ast.get_docstring(ast.parse(script.read_text())) or "").splitlines()[0]
        lines += [f"## [{script.name}]({script.stem}.md)", "", summary, ""]
        if pictures:
            lines += [f"[![{pictures[0].name}]({pictures[0].name}){{ width=400 }}]({script.stem}.md)", ""]
    return "\n".join(lines)


def main() -> None:
    shutil.rmtree(GALLERY, ignore_errors=True)
    GALLERY.mkdir(parents=True)
    summaries = []
    for script in sorted(EXAMPLES.glob("*.py")):
        num_updates = NUM_UPDATES.get(script.stem, DEFAULT_NUM_UPDATES)
        print(f"running {script.name} --num-updates {num_updates}", flush=True)
        output, pictures, seconds = run_example(script, num_updates)
        (GALLERY / f"{script.stem}.md").write_text(example_page(script, num_updates, output, pictures, seconds))
        summaries.append((script, pictures))
    (GALLERY / "index.md").write_text(index_page(summaries))


if __name__ == "__main__":
    main()
