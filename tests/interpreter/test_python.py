"""Python through the code server's default context: E2B's /execute cases."""

import datetime
import unittest

from code_server import CodeServer, error, main_text, of_type, stderr, stdout

server = None


def setUpModule():
    global server
    server = CodeServer()


def tearDownModule():
    server.stop()


class PythonExecuteTest(unittest.TestCase):
    def test_state_persists_between_runs(self):
        server.execute("counter = 41")
        lines = server.execute("counter += 1\ncounter")
        self.assertEqual(main_text(lines), "42")

    def test_stdout_and_stderr_are_lines_with_timestamps(self):
        lines = server.execute("import sys\nprint('to out')\nprint('to err', file=sys.stderr)")
        self.assertEqual(stdout(lines), "to out\n")
        self.assertEqual(stderr(lines), "to err\n")
        for line in of_type(lines, "stdout") + of_type(lines, "stderr"):
            datetime.datetime.fromisoformat(line["timestamp"])

    def test_execution_count_grows(self):
        first = of_type(server.execute("1"), "number_of_executions")[0]["execution_count"]
        second = of_type(server.execute("2"), "number_of_executions")[0]["execution_count"]
        self.assertEqual(second, first + 1)

    def test_string_result_loses_its_quotes(self):
        self.assertEqual(main_text(server.execute("'hello'")), "hello")

    def test_raw_text_keeps_the_kernels_text(self):
        # hutchd's OpenSandbox dialect asks for it: execd sends text/plain
        # as the kernel made it. The private key never reaches the wire.
        lines = server.execute("'hello'", raw_text=True)
        self.assertEqual(main_text(lines), "'hello'")
        for line in of_type(lines, "result") + of_type(server.execute("'x'"), "result"):
            self.assertNotIn("_raw_text", line)
        self.assertEqual(main_text(server.execute("6 * 7", raw_text=True)), "42")

    def test_zero_division_is_an_error_with_traceback(self):
        lines = server.execute("def f():\n    return 1 / 0\nf()")
        e = error(lines)
        self.assertEqual(e["name"], "ZeroDivisionError")
        self.assertEqual(e["value"], "division by zero")
        self.assertIsInstance(e["traceback"], str)
        self.assertIn("return 1 / 0", e["traceback"])
        self.assertNotIn("\x1b[", e["traceback"])  # plain text, no terminal colours

    def test_matplotlib_line_plot_gives_png_and_line_chart(self):
        lines = server.execute(
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [2, 4, 8], label='growth')\n"
            "plt.title('Growth over time')\n"
            "plt.xlabel('Time (s)')\n"
            "plt.ylabel('Size')\n"
            "plt.show()")
        results = [r for r in of_type(lines, "result") if "png" in r]
        self.assertEqual(len(results), 1, lines)
        self.assertTrue(results[0]["png"].startswith("iVBORw0KGgo"))  # base64 of a PNG header
        chart = results[0]["chart"]
        self.assertEqual(chart["type"], "line")
        self.assertEqual(chart["title"], "Growth over time")
        self.assertEqual(chart["x_label"], "Time (s)")
        self.assertEqual(chart["x_unit"], "s")
        self.assertEqual(chart["elements"][0]["label"], "growth")
        self.assertEqual(chart["elements"][0]["points"], [[1, 2], [2, 4], [3, 8]])

    def test_bar_pie_and_box_charts(self):
        lines = server.execute(
            "import matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots(); ax.bar(['A', 'B'], [3, 5], label='sold')\n"
            "fig, ax = plt.subplots(); ax.pie([90, 10], labels=['no', 'yes'])\n"
            "fig, ax = plt.subplots(); ax.boxplot([[1, 2, 3, 4, 50]], labels=['a'])\n")
        charts = [r["chart"] for r in of_type(lines, "result") if "chart" in r]
        self.assertEqual([c["type"] for c in charts], ["bar", "pie", "box_and_whisker"])
        self.assertEqual(charts[0]["elements"],
                         [{"label": "A", "group": "sold", "value": 3},
                          {"label": "B", "group": "sold", "value": 5}])
        self.assertEqual([(e["label"], e["angle"]) for e in charts[1]["elements"]],
                         [("no", 324), ("yes", 36)])
        box = charts[2]["elements"][0]
        self.assertEqual((box["median"], box["outliers"]), (3, [50]))

    def test_date_axis_line_and_subplots_superchart(self):
        lines = server.execute(
            "import datetime, matplotlib.pyplot as plt\n"
            "days = [datetime.date(2023, 9, 1) + datetime.timedelta(days=i) for i in range(3)]\n"
            "plt.figure(); plt.plot(days, [1.0, 2.0, 3.0], label='s'); plt.ylabel('Power [W]')\n"
            "fig, axs = plt.subplots(1, 2); axs[0].plot([1, 2]); axs[1].bar(['a'], [1])\n"
            "fig.suptitle('both')\n")
        charts = [r["chart"] for r in of_type(lines, "result") if "chart" in r]
        self.assertEqual(len(charts), 2, lines)
        self.assertEqual((charts[0]["type"], charts[0]["x_scale"], charts[0]["y_unit"]),
                         ("line", "datetime", "W"))
        self.assertEqual(charts[0]["elements"][0]["points"][0], ["2023-09-01", 1.0])
        self.assertEqual((charts[1]["type"], charts[1]["title"]), ("superchart", "both"))
        self.assertEqual([c["type"] for c in charts[1]["elements"]], ["line", "bar"])

    def test_dataframe_gives_data_and_html(self):
        lines = server.execute("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', None]})")
        main = [r for r in of_type(lines, "result") if r["is_main_result"]][0]
        self.assertEqual(main["data"], {"a": [1, 2], "b": ["x", None]})
        self.assertIn("<table", main["html"])

    def test_other_mime_forms(self):
        lines = server.execute(
            "from IPython.display import display, HTML, Markdown, JSON, Latex\n"
            "display(HTML('<b>x</b>'))\n"
            "display(Markdown('# t'))\n"
            "display(Latex('$x$'))\n"
            "display({'application/vnd.custom': 'c', 'text/plain': 'p'}, raw=True)")
        results = of_type(lines, "result")
        self.assertEqual(results[0]["html"], "<b>x</b>")
        self.assertEqual(results[1]["markdown"], "# t")
        self.assertEqual(results[2]["latex"], "$x$")
        self.assertEqual(results[3]["extra"], {"application/vnd.custom": "c"})
        self.assertTrue(all(not r["is_main_result"] for r in results))

    def test_env_vars_hold_for_one_run_only(self):
        lines = server.execute("import os\nos.environ.get('HUTCH_TEST_VAR')",
                               env_vars={"HUTCH_TEST_VAR": "only-now"})
        self.assertEqual(main_text(lines), "only-now")
        lines = server.execute("import os\nos.environ.get('HUTCH_TEST_VAR', 'unset')")
        self.assertEqual(main_text(lines), "unset")

    def test_server_environment_reaches_the_kernel(self):
        lines = server.execute("import os\nos.environ.get('HUTCH_SERVER_ENV_PROBE')")
        self.assertEqual(main_text(lines), "from-the-server")

    def test_default_context_runs_in_the_server_cwd(self):
        self.assertEqual(main_text(server.execute("import os\nos.getcwd()")), server.dir)


class RequestErrorsTest(unittest.TestCase):
    def test_context_id_and_language_together_is_400_text(self):
        status, body = server.request("POST", "/execute",
                                      {"code": "1", "context_id": "x", "language": "python"})
        self.assertEqual(status, 400)
        self.assertIn("context_id", body)

    def test_unknown_context_is_404_text(self):
        status, body = server.request("POST", "/execute", {"code": "1", "context_id": "nope"})
        self.assertEqual((status, body), (404, "Context nope not found"))

    def test_unknown_language_is_400(self):
        status, _ = server.request("POST", "/execute", {"code": "1", "language": "cobol"})
        self.assertEqual(status, 400)

    def test_malformed_body_is_400(self):
        self.assertEqual(server.request("POST", "/execute", "{")[0], 400)
        self.assertEqual(server.request("POST", "/execute", {"code": 1})[0], 400)
        self.assertEqual(server.request("POST", "/execute",
                                        {"code": "1", "env_vars": {"A": 1}})[0], 400)

    def test_health(self):
        self.assertEqual(server.request("GET", "/health")[0], 200)

    def test_unknown_route_is_404(self):
        self.assertEqual(server.request("GET", "/nope")[0], 404)


if __name__ == "__main__":
    unittest.main()
