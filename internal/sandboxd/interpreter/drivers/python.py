# Paddock's Python kernel driver (internal/sandboxd/interpreter). sandboxd runs it with
# `python3 -u -c <this file>` and speaks JSON lines with it: requests arrive on fd 3, messages
# leave on fd 4 (see doc.go for the protocol). Output goes to fd 1 and 2, which sandboxd reads
# up to the mark this driver writes there at the end of every cell.
import ast
import asyncio
import base64
import builtins
import importlib.abc
import importlib.util
import io
import json
import linecache
import math
import os
import signal
import sys
import threading
import traceback

_DRIVER_FILE = sys._getframe().f_code.co_filename
_REQ = os.fdopen(3, "r", encoding="utf-8")
_OUT_FD = 4
_OUT_LOCK = threading.Lock()


def _send(msg):
    data = (json.dumps(msg, default=_jsonable_default, allow_nan=False) + "\n").encode("ascii")
    with _OUT_LOCK:
        while data:
            data = data[os.write(_OUT_FD, data):]


class _Stream(io.TextIOBase):
    """A line-buffered text stream on fd 1 or 2, which sandboxd reads: what the cell prints and
    what its child processes write arrive through the same pipe, in order."""

    def __init__(self, name, fd):
        self._name, self._fd, self._buf, self._lock = name, fd, [], threading.Lock()
        self._timer = None

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        with self._lock:
            self._buf.append(s)
            pending = "\n" in s or sum(map(len, self._buf)) >= 8192
            if not pending and self._timer is None:
                # A partial line (print(..., end='')) is sent after 0.1 s, as ipykernel does.
                self._timer = threading.Timer(0.1, self.flush)
                self._timer.daemon = True
                self._timer.start()
        if pending:
            self.flush()
        return len(s)

    def flush(self):
        with self._lock:
            text, self._buf = "".join(self._buf), []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        data = text.encode("utf-8", "surrogateescape")
        while data:
            data = data[os.write(self._fd, data):]


sys.stdout = _Stream("stdout", 1)
sys.stderr = _Stream("stderr", 2)

# --- JSON of arbitrary values (DataFrame columns, charts) -------------------------------------


def _clean(value):
    """value with every float NaN or infinity as None and numpy scalars and arrays as Python."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):
        return _clean(value.tolist())
    if hasattr(value, "isoformat") and callable(value.isoformat):
        try:
            return value.isoformat()
        except Exception:
            return str(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    try:
        import numpy
        if isinstance(value, numpy.generic):
            return _clean(value.item())
    except ImportError:
        pass
    return str(value)


def _jsonable_default(value):
    return _clean(value) if not isinstance(value, (dict, list, tuple)) else str(value)


# --- Rich display ----------------------------------------------------------------------------

_REPR_METHODS = [
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_pdf_", "application/pdf"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
]
_BINARY = {"image/png", "image/jpeg", "application/pdf"}


def _repr_method(obj, name):
    # Classes are not displayed through their unbound methods; objects whose __getattr__ answers
    # everything (mocks, proxies) are asked only for what their type really defines.
    if isinstance(obj, type):
        return None
    if getattr(type(obj), name, None) is None and name not in getattr(obj, "__dict__", {}):
        return None
    method = getattr(obj, name, None)
    return method if callable(method) else None


def _encode(mime, value):
    if mime in _BINARY and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if mime == "application/json":
        return _clean(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return value


def _is_figure(obj):
    mpl = sys.modules.get("matplotlib.figure")
    return mpl is not None and isinstance(obj, mpl.Figure)


def _is_dataframe(obj):
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def _figure_bundle(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    bundle = {"text/plain": repr(fig), "image/png": base64.b64encode(buf.getvalue()).decode("ascii")}
    try:
        bundle["e2b/chart"] = _clean(chart_of_figure(fig))
    except Exception:
        bundle["e2b/chart"] = {}
    return bundle


def mime_bundle(obj):
    """The MIME bundle of obj: text/plain always, plus what its _repr_*_ methods offer."""
    if _is_figure(obj):
        return _figure_bundle(obj)
    bundle = {}
    method = _repr_method(obj, "_repr_mimebundle_")
    if method is not None:
        try:
            got = method(include=None, exclude=None)
        except Exception:
            got = None
        if isinstance(got, tuple):
            got = got[0]
        if isinstance(got, dict):
            for mime, value in got.items():
                bundle[mime] = _encode(mime, value)
    for name, mime in _REPR_METHODS:
        if mime in bundle:
            continue
        method = _repr_method(obj, name)
        if method is None:
            continue
        try:
            value = method()
        except Exception:
            continue
        if isinstance(value, tuple):  # (data, metadata)
            value = value[0]
        if value is not None:
            bundle[mime] = _encode(mime, value)
    if _is_dataframe(obj):
        try:
            bundle["e2b/data"] = _clean(obj.to_dict(orient="list"))
        except Exception:
            pass
    if "text/plain" not in bundle:
        bundle["text/plain"] = repr(obj)
    return bundle


def _result(obj, main):
    _flush_streams()
    _send({"type": "result", "main": main, "data": mime_bundle(obj)})


def display(*objs, **kwargs):
    """Shows every object as a result of the running cell (several per cell)."""
    raw = kwargs.get("raw", False)
    for obj in objs:
        if raw and isinstance(obj, dict):
            _flush_streams()
            _send({"type": "result", "main": False, "data": {k: _encode(k, v) for k, v in obj.items()}})
        else:
            _result(obj, False)


builtins.display = display

# --- matplotlib: figures are displayed by plt.show() and at the end of every cell -------------

_BACKEND = "paddock_inline"
_BACKEND_SOURCE = """
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas
from matplotlib.backend_bases import FigureManagerBase as FigureManager


def show(*args, **kwargs):
    import builtins
    builtins.__paddock_show_figures__()
"""


class _BackendFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == _BACKEND:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(_BACKEND_SOURCE, "<paddock matplotlib backend>", "exec"), module.__dict__)


sys.meta_path.append(_BackendFinder())
os.environ["MPLBACKEND"] = "module://" + _BACKEND

# sandboxd passes the directory of prebuilt matplotlib font caches (the code-interpreter image's).
_FONT_CACHES = sys.argv[1] if len(sys.argv) > 1 else ""
sys.argv = [""]


class _FontCacheSeeder(importlib.abc.MetaPathFinder):
    """Before matplotlib's first import, copies the prebuilt font caches into the directory
    matplotlib reads them from, where they are missing, so that the import does not spend seconds
    building one. It finds no module itself."""

    seeded = False

    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" and not self.seeded:
            self.seeded = True
            try:
                _seed_font_cache()
            except Exception:
                pass  # matplotlib then builds its cache as it always does
        return None


def _seed_font_cache():
    if not _FONT_CACHES or os.environ.get("MPLCONFIGDIR"):
        return
    try:
        names = [n for n in os.listdir(_FONT_CACHES) if n.startswith("fontlist-") and n.endswith(".json")]
    except OSError:
        return
    # matplotlib's cache directory on Linux without MPLCONFIGDIR.
    dest = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "matplotlib")
    for name in names:
        target = os.path.join(dest, name)
        if os.path.exists(target):
            continue
        import shutil
        os.makedirs(dest, exist_ok=True)
        tmp = "%s.%d.tmp" % (target, os.getpid())
        shutil.copyfile(os.path.join(_FONT_CACHES, name), tmp)
        os.replace(tmp, target)


sys.meta_path.insert(0, _FontCacheSeeder())


def _show_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        if fig.get_axes() or fig.texts or fig.images:
            _result(fig, False)
    plt.close("all")


builtins.__paddock_show_figures__ = _show_figures

# --- chart description of a matplotlib figure (e2b/chart) --------------------------------------


def _sig(x):
    return float("%.8g" % x)


def _label_unit(label):
    label = label or None
    if not label:
        return None, None
    for open_, close in (("(", ")"), ("[", "]")):
        if label.endswith(close) and open_ in label:
            return label, label[label.rindex(open_) + 1:-1].strip() or None
    return label, None


def _axis_scale(ax, axis):
    from matplotlib.dates import DateConverter, _SwitchableDateConverter

    converter = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    if isinstance(converter, (DateConverter, _SwitchableDateConverter)):
        return "datetime"
    scale = axis.get_scale()
    if scale == "linear":
        ticks = list(axis.get_ticklocs())
        labels = [t.get_text() for t in axis.get_ticklabels()]
        if ticks and ticks == list(range(len(ticks))) and any(l not in ("", str(i)) for i, l in enumerate(labels)):
            return "categorical"
    return scale


def _coord(value, scale):
    if scale == "datetime":
        from matplotlib.dates import num2date
        try:
            return num2date(value).isoformat()
        except Exception:
            return value
    try:
        import numpy
        if isinstance(value, numpy.datetime64):
            return str(value)
    except ImportError:
        pass
    return _clean(value)


def _axes_common(ax, kind):
    x_label, x_unit = _label_unit(ax.get_xlabel())
    y_label, y_unit = _label_unit(ax.get_ylabel())
    return {"type": kind, "title": ax.get_title() or None, "x_label": x_label, "y_label": y_label,
            "x_unit": x_unit, "y_unit": y_unit, "elements": []}


def _ticks(ax, chart):
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        scale = _axis_scale(ax, axis)
        chart[name + "_scale"] = scale
        chart[name + "_ticks"] = [_coord(t, scale) for t in axis.get_ticklocs()]
        chart[name + "_tick_labels"] = [t.get_text() for t in axis.get_ticklabels()]


def _is_grid_line(line):
    xs, ys = line.get_xdata(), line.get_ydata()
    return len(xs) == 2 and (xs[0] == xs[1] or ys[0] == ys[1])


def _element_label(label, prefix, word):
    if label.startswith(prefix):
        return "%s %s" % (word, label[len(prefix):])
    return label


def _line_chart(ax):
    chart = _axes_common(ax, "line")
    _ticks(ax, chart)
    xscale, yscale = chart["x_scale"], chart["y_scale"]
    for line in ax.get_lines():
        points = [[_coord(x, xscale), _coord(y, yscale)] for x, y in zip(line.get_xdata(), line.get_ydata())]
        chart["elements"].append({"label": _element_label(str(line.get_label()), "_child", "Line"), "points": points})
    return chart


def _scatter_chart(ax, collections):
    chart = _axes_common(ax, "scatter")
    _ticks(ax, chart)
    xscale, yscale = chart["x_scale"], chart["y_scale"]
    for coll in collections:
        points = [[_coord(x, xscale), _coord(y, yscale)] for x, y in coll.get_offsets()]
        chart["elements"].append({"label": str(coll.get_label()), "points": points})
    return chart


def _bar_chart(ax, rects):
    chart = _axes_common(ax, "bar")
    heights = {r.get_height() for r in rects}
    horizontal = len(rects) > 1 and len(heights) == 1
    group_of = {}
    for container in ax.containers:
        for patch in getattr(container, "patches", []):
            group_of[id(patch)] = _element_label(str(container.get_label()), "_container", "Group")
    if horizontal:
        labels = [t.get_text() for t in ax.get_yticklabels()]
        ticks = list(ax.get_yticks())
        for k in ("label", "unit"):
            chart["x_" + k], chart["y_" + k] = chart["y_" + k], chart["x_" + k]
    else:
        labels = [t.get_text() for t in ax.get_xticklabels()]
        ticks = list(ax.get_xticks())
    for rect in rects:
        if horizontal:
            center, value = rect.get_y() + rect.get_height() / 2, rect.get_width()
        else:
            center, value = rect.get_x() + rect.get_width() / 2, rect.get_height()
        label = ""
        for tick, text in zip(ticks, labels):
            if abs(tick - center) < 1e-9:
                label = text
                break
        chart["elements"].append({"label": label, "group": group_of.get(id(rect), ""), "value": _clean(value)})
    return chart


def _pie_chart(ax, wedges):
    chart = {"type": "pie", "title": ax.get_title() or None, "elements": []}
    for w in wedges:
        chart["elements"].append({"label": str(w.get_label()), "angle": _sig(abs(w.theta2 - w.theta1)), "radius": _clean(w.r)})
    return chart


def _box_chart(ax, patches, lines):
    chart = _axes_common(ax, "box_and_whisker")
    labels = [t.get_text() for t in ax.get_xticklabels()]
    vertical = True
    for i, patch in enumerate(patches):
        verts = patch.get_path().vertices
        xs, ys = verts[:, 0], verts[:, 1]
        if xs.max() - xs.min() > ys.max() - ys.min() and len(patches) > 1:
            vertical = False
        lo_axis, span = (ys, xs) if vertical else (xs, ys)
        q1, q3 = float(lo_axis.min()), float(lo_axis.max())
        center = (span.min() + span.max()) / 2
        whiskers, median, outliers = [], None, []
        for line in lines:
            lx, ly = line.get_xdata(), line.get_ydata()
            if len(lx) == 0:
                continue
            along, across = (ly, lx) if vertical else (lx, ly)
            if not (span.min() - 1e-9 <= across[0] <= span.max() + 1e-9 or abs(across[0] - center) < 1e-9):
                continue
            if line.get_linestyle() == "None" and line.get_marker() not in (None, "", "None"):
                outliers.extend(float(v) for v in along)
            elif len(along) == 2 and along[0] == along[1] and q1 <= along[0] <= q3 and across[0] != across[1]:
                median = float(along[0])
            else:
                whiskers.extend(float(v) for v in along)
        low = min([q1] + [w for w in whiskers if w <= q1])
        high = max([q3] + [w for w in whiskers if w >= q3])
        chart["elements"].append({
            "label": labels[i] if i < len(labels) else str(i + 1),
            "min": _sig(low), "first_quartile": _sig(q1),
            "median": _sig(median if median is not None else (q1 + q3) / 2),
            "third_quartile": _sig(q3), "max": _sig(high),
            "outliers": [_sig(v) for v in outliers],
        })
    return chart


def _axes_chart(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text

    children = [c for c in ax.get_children() if not isinstance(c, Text)]
    # The axes' own frame: spines, the background patch, the axis objects.
    children = [c for c in children if c is not ax.patch and c not in ax.spines.values()
                and c is not ax.xaxis and c is not ax.yaxis and type(c).__name__ != "Legend"]
    if children and all(isinstance(c, Line2D) for c in children):
        return _line_chart(ax)
    if any(isinstance(c, PathPatch) for c in children) and all(isinstance(c, (PathPatch, Line2D)) for c in children):
        return _box_chart(ax, [c for c in children if isinstance(c, PathPatch)], [c for c in children if isinstance(c, Line2D)])
    rest = [c for c in children if not (isinstance(c, Line2D) and _is_grid_line(c))]
    if rest and all(isinstance(c, PathCollection) for c in rest):
        return _scatter_chart(ax, rest)
    if children and all(isinstance(c, Wedge) for c in children):
        return _pie_chart(ax, children)
    if children and all(isinstance(c, Rectangle) for c in children):
        return _bar_chart(ax, children)
    return {"type": "unknown", "title": ax.get_title() or None, "elements": []}


def chart_of_figure(fig):
    """The e2b/chart description of a matplotlib figure: {} when it has no axes."""
    axes = fig.get_axes()
    if not axes:
        return {}
    if len(axes) > 1:
        suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
        return {"type": "superchart", "title": suptitle, "elements": [_axes_chart(ax) for ax in axes]}
    return _axes_chart(axes[0])


# --- Running cells ------------------------------------------------------------------------------

_NS = {"__name__": "__main__", "__builtins__": builtins}
_LOOP = asyncio.new_event_loop()
_running = False  # SIGINT raises KeyboardInterrupt only while user code runs
_count = 0


def _on_sigint(signum, frame):
    if _running:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)


def _flush_streams():
    sys.stdout.flush()
    sys.stderr.flush()


def _user_frames(tb):
    """The traceback without this driver's own frames."""
    while tb is not None and tb.tb_frame.f_code.co_filename == _DRIVER_FILE:
        tb = tb.tb_next
    return tb


def _send_error(exc):
    tb = _user_frames(exc.__traceback__)
    lines = traceback.format_exception(type(exc), exc, tb)
    _flush_streams()
    _send({"type": "error", "name": type(exc).__name__, "value": str(exc), "traceback": "".join(lines)})


def _run(code_obj):
    global _running
    _running = True
    try:
        value = eval(code_obj, _NS)
        if asyncio.iscoroutine(value):
            value = _LOOP.run_until_complete(value)
        return value
    finally:
        _running = False


def _shell(command):
    """IPython's !command: runs command with the shell, its output going to the cell's."""
    import subprocess

    proc = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for chunk in iter(lambda: proc.stdout.read1(65536), b""):
        sys.stdout.write(chunk.decode("utf-8", "replace"))
    proc.wait()


def _magic(line):
    """The IPython line magics cells use most: %cd, %pip and %env; others are an error."""
    name, _, arg = line.partition(" ")
    arg = arg.strip()
    if name == "cd":
        os.chdir(os.path.expanduser(arg or "~"))
        print(os.getcwd())
    elif name == "pip":
        _shell("%s -m pip %s" % (sys.executable, arg))
    elif name == "env" and "=" in arg:
        key, _, value = arg.partition("=")
        os.environ[key.strip()] = value.strip()
    else:
        raise NameError("line magic %%%s is not supported by this interpreter (it supports %%cd, %%pip, %%env and !command)" % name)


builtins.__paddock_shell__ = _shell
builtins.__paddock_magic__ = _magic


def _parse(code, filename):
    """Parses code as Python; when that fails, as Python with IPython's !command and %magic lines
    (which Python never accepts, so valid code is never rewritten)."""
    try:
        return ast.parse(code, filename, "exec")
    except SyntaxError as err:
        lines = code.splitlines(True)
        changed = False
        for i, line in enumerate(lines):
            stripped = line.lstrip()
            indent = line[: len(line) - len(stripped)]
            text = stripped.rstrip("\r\n")
            if text.startswith("!"):
                lines[i] = "%s__paddock_shell__(%r)\n" % (indent, text[1:])
                changed = True
            elif text.startswith("%") and not text.startswith("%%"):
                lines[i] = "%s__paddock_magic__(%r)\n" % (indent, text[1:])
                changed = True
        if not changed:
            raise
        try:
            return ast.parse("".join(lines), filename, "exec")
        except SyntaxError:
            raise err from None


def run_cell(code):
    """Runs code like an IPython cell: the last expression's value is the main result."""
    global _count
    _count += 1
    filename = "<cell-%d>" % _count
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        tree = _parse(code, filename)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec", flags=flags)
        tail = compile(last, filename, "eval", flags=flags) if last is not None else None
        _run(body)
        if tail is not None:
            value = _run(tail)
            if value is not None:
                builtins._ = value
                _result(value, True)
    except BaseException as exc:  # KeyboardInterrupt and SystemExit included, as in IPython
        _send_error(exc)
    finally:
        try:
            _show_figures()
        except Exception as exc:
            _send_error(exc)
        _flush_streams()


def _with_env(env, fn):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        fn()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _apply_env(setenv, unsetenv):
    """The sandbox's environment changed since this kernel started, before its first cell (a warm
    member was claimed): os.environ, and with it the environment of the processes cells start,
    takes the change for good."""
    for k in unsetenv or ():
        os.environ.pop(k, None)
    os.environ.update(setenv or {})
    if "TZ" in (setenv or {}) or "TZ" in (unsetenv or ()):
        import time
        time.tzset()


def _mark(marker):
    written = []
    for name, fd in (("stdout", 1), ("stderr", 2)):
        try:
            data = marker.encode("ascii")
            while data:
                data = data[os.write(fd, data):]
            written.append(name)
        except OSError:
            pass
    return written


def main():
    marker = None
    _send({"type": "ready"})
    while True:
        try:
            line = _REQ.readline()
        except KeyboardInterrupt:
            continue
        if not line:
            return
        req = json.loads(line)
        if req.get("marker"):
            marker = req["marker"]
        _apply_env(req.get("setenv"), req.get("unsetenv"))
        _with_env(req.get("env") or {}, lambda: run_cell(req.get("code", "")))
        _send({"type": "done", "marks": _mark(marker) if marker else []})


main()
