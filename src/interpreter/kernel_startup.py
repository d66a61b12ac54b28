# Runs once inside every Python kernel the code server starts (passed as
# IPKernelApp.exec_files, so before the kernel answers its first request).
# It runs in the user's namespace: everything happens inside one function
# that is deleted afterwards, so the user's variables start empty.
#
# It installs what the server cannot do from outside:
# - formatters for two MIME types of our own: a pandas DataFrame's
#   columns (E2B's `data`) and a matplotlib figure's chart (E2B's
#   `chart`); both find their class by name in sys.modules, so neither
#   pandas nor matplotlib is imported until the user's code imports it;
# - plain tracebacks (no ANSI colours): agents read them as text;
# - the per-run environment helpers the server calls around a run
#   (sys.modules["__hutch__"].set_env / restore_env).


def _hutch_install():
    import importlib.util
    import json
    import os
    import sys
    import types

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter

    ip = get_ipython()
    here = os.environ.pop("HUTCH_INTERPRETER_DIR", "")

    class JsonMimeFormatter(BaseFormatter):
        """Formats instances of classes named by module and name into a JSON value.

        Not BaseFormatter's type registry: matplotlib's inline backend pops
        Figure from every registered formatter when it activates, which
        would drop our chart. The class is looked up in sys.modules, so
        nothing is imported before the user's code imports it.
        """

        _return_type = (dict, list)

        def __init__(self, mime, module, name, fn, **kw):
            super().__init__(**kw)
            self.format_type = mime
            self.print_method = "_repr_hutch_none_"
            self._target = (module, name, fn)

        def __call__(self, obj):
            module, name, fn = self._target
            cls = getattr(sys.modules.get(module), name, None)
            if cls is None or not isinstance(obj, cls):
                return None
            try:
                return fn(obj)
            except Exception:
                # A chart or data we cannot read is left out; the png and
                # html of the same display still go.
                return None

    def dataframe_columns(df):
        split = json.loads(df.to_json(orient="split", date_format="iso", default_handler=str))
        columns = [str(c) for c in split["columns"]]
        return {c: [row[i] for row in split["data"]] for i, c in enumerate(columns)}

    chart_module = None

    def figure_chart(fig):
        nonlocal chart_module
        if chart_module is None:
            spec = importlib.util.spec_from_file_location(
                "__hutch_chart__", os.path.join(here, "chart_extract.py"))
            chart_module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(chart_module)
        return chart_module.figure_chart(fig)

    data = JsonMimeFormatter("application/vnd.hutch.data+json", "pandas.core.frame", "DataFrame",
                             dataframe_columns, parent=ip.display_formatter)
    chart = JsonMimeFormatter("application/vnd.hutch.chart+json", "matplotlib.figure", "Figure",
                              figure_chart, parent=ip.display_formatter)
    ip.display_formatter.formatters[data.format_type] = data
    ip.display_formatter.formatters[chart.format_type] = chart

    ip.run_line_magic("colors", "NoColor")

    saved = {}

    def set_env(values):
        saved.clear()
        for k, v in values.items():
            saved[k] = os.environ.get(k)
            os.environ[k] = v

    def restore_env():
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
        saved.clear()

    helpers = types.ModuleType("__hutch__")
    helpers.set_env = set_env
    helpers.restore_env = restore_env
    sys.modules["__hutch__"] = helpers


_hutch_install()
del _hutch_install
