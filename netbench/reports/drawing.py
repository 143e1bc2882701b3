"""matplotlib as netbench draws with it: configured by netbench alone, never by the folder it runs in.

matplotlib reads a ``matplotlibrc`` from the working directory first, then ``$MATPLOTLIBRC``, ``$MPLCONFIGDIR`` and
``~/.config/matplotlib``, and style files from the configuration folder's ``stylelib``. ``netbench report`` runs as
root inside folders others hand it: a ``matplotlibrc`` there with ``lines.markersize: 100000`` takes the machine's
memory, ``text.usetex`` starts TeX (whose preamble can read files into a figure that report.html inlines), a bad
``font.size`` is a traceback, a FIFO of that name blocks the import. So every module that draws imports pyplot from
here, and here:

- the environment names matplotlib's own default file (``MATPLOTLIBRC``) and a configuration folder netbench owns
  (``MPLCONFIGDIR``, in netbench's checked cache folder; a fresh private one where that cannot be had), before
  matplotlib is imported, so child processes inherit the same;
- matplotlib is imported with the working directory set to that folder, so no ``./matplotlibrc`` is opened;
- the parameters are then reset to matplotlib's defaults (``rcdefaults``) and netbench's few settings applied
  (:data:`STYLE`), whatever was read before this module was imported.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from netbench.cache import CacheFolderError, checked_cache_dir
from netbench.safe_files import UnsafeOutput, make_folder

__all__ = ["STYLE", "Line2D", "Patch", "matplotlib", "plt"]

# netbench's own parameters on top of matplotlib's defaults: labels come from summary.csv, and a "$" there must print
# as a dollar, not start mathtext that fails to parse when drawn
STYLE = {"text.parse_math": False, "text.usetex": False}


def _config_folder() -> str:
    """A folder only netbench writes, for matplotlib's configuration and font cache."""
    try:
        return str(make_folder(checked_cache_dir() / "matplotlib"))
    except (CacheFolderError, UnsafeOutput, OSError):
        return tempfile.mkdtemp(prefix="netbench-matplotlib-")


def _default_rc() -> str | None:
    """matplotlib's own default parameter file, found without importing matplotlib."""
    spec = importlib.util.find_spec("matplotlib")
    for folder in spec.submodule_search_locations or () if spec else ():
        path = Path(folder) / "mpl-data" / "matplotlibrc"
        if path.is_file():
            return str(path)
    return None


@contextlib.contextmanager
def _working_directory(folder: str) -> Iterator[None]:
    try:
        here: str | None = os.getcwd()
    except OSError:  # the working directory was removed: nothing there to read either
        here = None
    os.chdir(folder)
    try:
        yield
    finally:
        if here is not None:
            os.chdir(here)


_folder = _config_folder()
os.environ["MPLCONFIGDIR"] = _folder
os.environ["MPLBACKEND"] = "Agg"
_rc = _default_rc()
if _rc:
    os.environ["MATPLOTLIBRC"] = _rc
with _working_directory(_folder):
    import matplotlib

    matplotlib.use("Agg")  # no display: figures are files
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 - the figures' axis formatters
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

matplotlib.rcdefaults()
matplotlib.rcParams.update(STYLE)
