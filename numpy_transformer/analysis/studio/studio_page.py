"""The attention studio's page: studio.html with studio.css, studio.js and the data (studio_data)
inlined, so that the file opens from disk and asks for nothing over the network.

`write_studio_page(path, data)` writes it atomically (training/atomic_files.py) and replaces only
a page it wrote before (one whose first lines carry GENERATOR): any other file at `path` is
refused and left alone. `StudioView(data)` shows the same page inline in a notebook, in an iframe
whose `srcdoc` holds it.
"""
import html
import json
from pathlib import Path

from numpy_transformer.training.atomic_files import atomic_write_text

HERE = Path(__file__).parent
GENERATOR = '<meta name="generator" content="numpy-transformer attention studio">'


def json_for_script(data):
    """JSON that is safe inside <script>: "</" (which would close the element) is written "<\\/"."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")


def studio_html(data):
    """The whole page, one string: the template with its style, script and data filled in."""
    template = (HERE / "studio.html").read_text(encoding="utf-8")
    title = f"attention studio: {data.get('model') or 'model'}"
    return (template.replace("{{generator}}", GENERATOR)
            .replace("{{title}}", html.escape(title))
            .replace("{{style}}", (HERE / "studio.css").read_text(encoding="utf-8"))
            .replace("{{data}}", json_for_script(data))
            .replace("{{script}}", (HERE / "studio.js").read_text(encoding="utf-8")))


def is_studio_page(path):
    """True if `path` is a page this module wrote (GENERATOR within its first kilobyte)."""
    with open(path, "rb") as file:
        return GENERATOR.encode() in file.read(1024)


def check_page_path(path):
    """A ValueError unless `path` may be written: a new file in an existing folder, or a page
    written here before (never a folder, a link or another file)."""
    path = Path(path)
    if str(path) in ("", "."):
        raise ValueError("--html needs a file name, e.g. attention.html")
    if path.is_dir():
        raise ValueError(f"--html {path} is a folder; give a file name, e.g. {path / 'attention.html'}")
    if path.exists() and not path.is_symlink() and not is_studio_page(path):
        raise ValueError(f"--html {path} exists and is not an attention studio page: it is left alone; "
                         f"choose another file name")
    if not path.parent.is_dir():
        raise ValueError(f"--html {path}: the folder {path.parent} does not exist")


def write_studio_page(path, data):
    """Write the page to `path` (a new file, or a page written here before); returns its size in bytes."""
    check_page_path(path)
    page = studio_html(data)
    atomic_write_text(path, page)
    return len(page.encode("utf-8"))


class StudioView:
    """The studio inline in Jupyter: `StudioView(data)` as a cell's last line shows the page in
    an iframe (its own document, so its script and style touch nothing of the notebook's)."""

    def __init__(self, data, height=720):
        self.data, self.height = data, height

    def _repr_html_(self):
        return (f'<iframe srcdoc="{html.escape(studio_html(self.data), quote=True)}" '
                f'style="width: 100%; height: {self.height}px; border: 1px solid #ccc" '
                f'sandbox="allow-scripts allow-downloads"></iframe>')
