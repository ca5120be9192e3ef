"""No code of the package decides by reading an error's words.

The native core says what went wrong by kind and attributes (an exception's class,
``err_code``, ``options``, ``column``, ``seq``/``field``, a row's error code, a read's
``_corrupt_reason`` column); its messages are for people, and a change of wording
there must change no behaviour here. This test parses every module of
``python/jetstream_arrow`` and fails on code that inspects an error's text: compares
it, searches it (``in``, ``startswith``, ``find``, a regular expression), edits it
(``replace``), or hands it to a function of the module that could. Building a new
message that includes the old one (an f-string, an exception's argument, a log line)
is not inspecting it.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "jetstream_arrow"

#: Names of values that hold an error or its text: ``e``, ``err``, ``exc``,
#: ``error``, ``first_error``, ``errors`` ...
_ERRORISH = re.compile(r"^(?:.*_)?(?:e|err|errs|error|errors|exc|exception)$")
#: ``str`` methods that search or edit a text.
_INSPECTING_METHODS = frozenset(
    {
        "replace",
        "startswith",
        "endswith",
        "find",
        "rfind",
        "index",
        "rindex",
        "count",
        "partition",
        "rpartition",
        "removeprefix",
        "removesuffix",
        "split",
        "rsplit",
        "__contains__",
    }
)
#: Regular expressions' functions and a compiled pattern's methods.
_REGEX_CALLS = frozenset(
    {"sub", "subn", "match", "search", "fullmatch", "findall", "finditer", "split"}
)
#: ``str`` methods that only reshape a text for showing it: their result is still
#: the error's text.
_RESHAPING_METHODS = frozenset({"strip", "lstrip", "rstrip", "lower", "upper", "splitlines"})


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, module_functions: set[str]) -> None:
        self.path = path
        self.module_functions = module_functions
        self.findings: list[Finding] = []
        # Per function: names bound to an exception (``except ... as e``, a
        # parameter typed as one) and names holding an error's text.
        self.exceptions: list[set[str]] = [set()]
        self.texts: list[set[str]] = [set()]

    # -- scopes -------------------------------------------------------------------

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        exceptions = set()
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            annotation = ast.unparse(arg.annotation) if arg.annotation else ""
            if re.search(r"(Error|Exception|BaseException)\b", annotation):
                exceptions.add(arg.arg)
        self.exceptions.append(exceptions)
        self.texts.append(set())
        self.generic_visit(node)
        self.exceptions.pop()
        self.texts.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.exceptions[-1].add(node.name)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if self._is_text(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.texts[-1].add(target.id)
        self.generic_visit(node)

    # -- what an error's text is ------------------------------------------------------

    def _is_exception(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.exceptions[-1] or bool(_ERRORISH.match(node.id))
        if isinstance(node, ast.Attribute):
            return bool(_ERRORISH.match(node.attr))
        return False

    def _is_text(self, node: ast.expr) -> bool:
        """Whether ``node`` is an error's text: ``str(err)``, ``err.args[...]``,
        ``err.description``, a name holding one, or one reshaped for showing."""
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "str" and node.args:
                return self._is_exception(node.args[0])
            if isinstance(func, ast.Attribute) and func.attr in _RESHAPING_METHODS:
                return self._is_text(func.value)
            return False
        if isinstance(node, ast.Subscript):
            return self._is_text(node.value) or (
                isinstance(node.value, ast.Attribute)
                and node.value.attr == "args"
                and self._is_exception(node.value.value)
            )
        if isinstance(node, ast.Attribute):
            return node.attr == "description" and self._is_exception(node.value)
        if isinstance(node, ast.Name):
            return node.id in self.texts[-1]
        if isinstance(node, ast.BoolOp):
            return any(self._is_text(v) for v in node.values)
        return False

    def _flag(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(self.path, getattr(node, "lineno", 0), what))

    # -- what inspects it -------------------------------------------------------------

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            if not isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq)):
                continue
            inspected = self._is_text(left) or self._is_text(right)
            # `"words" in error` where error is already a text (a row's error).
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, ast.Constant):
                inspected = inspected or (isinstance(left.value, str) and self._is_exception(right))
            if inspected:
                self._flag(node, f"compares an error's text: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        args = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Attribute):
            if func.attr in _INSPECTING_METHODS and self._is_text(func.value):
                self._flag(node, f"searches or edits an error's text: {ast.unparse(node)}")
            if func.attr in _REGEX_CALLS and any(self._is_text(a) for a in args):
                self._flag(node, f"matches a pattern on an error's text: {ast.unparse(node)}")
        callee = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else None
        )
        if callee in self.module_functions and any(self._is_text(a) for a in args):
            self._flag(
                node, f"hands an error's text to {callee}(), which may read it: {ast.unparse(node)}"
            )
        self.generic_visit(node)


def prose_matching(source: str, path: str = "<source>") -> list[Finding]:
    """Where ``source`` inspects an error's text."""
    tree = ast.parse(source)
    functions = {
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    checker = _Checker(path, functions)
    checker.visit(tree)
    return checker.findings


def test_no_module_reads_an_errors_words() -> None:
    findings: list[Finding] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        findings += prose_matching(source, str(path.relative_to(PACKAGE.parent)))
    assert not findings, "code that decides by an error's words:\n" + "\n".join(map(str, findings))


#: What the package did before its errors carried kinds and attributes: each must be
#: found, so the check above is not blind to them.
_READING_THE_WORDS = {
    "advice stripped by a regex": """
        import re
        _ADVICE = re.compile(r" \\(mode 'failfast'; .*\\)$")
        def error_text(client):
            try:
                client.read()
            except ValueError as e:
                return _ADVICE.sub("", str(e))
    """,
    "a column renamed inside the message": """
        class Columns:
            def _as_named(self, message):
                return message
            def check(self):
                try:
                    check()
                except ValueError as err:
                    raise ValueError(self._as_named(str(err))) from None
    """,
    "a column name looked for in the message": """
        def note(message, column):
            try:
                check()
            except ValueError as err:
                if f"column '{column}'" in str(err):
                    return 1
    """,
    "option names looked for in the message": """
        def _spark_names_in(message):
            return message
        def options(given):
            try:
                connect(**given)
            except ValueError as err:
                raise ValueError(f"{err} ({_spark_names_in(str(err))})") from None
    """,
    "a row's error searched for the server's words": """
        def task(result, expected):
            first_error = result.failed_rows().column("error")[0].as_py()
            if expected and "expected stream" in str(first_error):
                return 1
    """,
    "an OS error told by its text": """
        def start(server, port):
            try:
                server.start()
            except OSError as e:
                if port and "address already in use" in str(e):
                    raise
    """,
    "option names replaced inside the message": """
        def codec(args):
            try:
                return make(args)
            except ValueError as e:
                raise RuntimeError(str(e).replace("'protobuf_descriptor'", "--flag")) from None
    """,
    "a text kept in a variable, then searched": """
        def explain(error: BaseException):
            text = str(error).strip()
            if text.startswith("stream"):
                return 1
    """,
}

#: What builds a new message from an error's, or acts on its kind and attributes.
_NOT_READING_THE_WORDS = """
    import errno
    import logging
    _log = logging.getLogger(__name__)

    def show(args, options):
        try:
            run(args)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            _log.warning("failed: %s", str(e))
            raise RuntimeError(f"cannot run: {e} ({first})") from None
        except ValueError as err:
            if "subject" in err.options or err.column == "data" or err.err_code == 10060:
                raise ValueError(f"{err} (flags: --subject)", options=err.options) from None
            raise ValueError(str(err)) from None

    def explain(error: BaseException) -> str:
        text = str(error).strip() or type(error).__name__
        return f"timed out: {text}"
"""


def test_the_check_finds_each_way_of_reading_an_errors_words() -> None:
    for name, source in _READING_THE_WORDS.items():
        assert prose_matching(textwrap.dedent(source)), f"not found: {name}"


def test_the_check_lets_new_messages_and_attributes_be() -> None:
    assert prose_matching(textwrap.dedent(_NOT_READING_THE_WORDS)) == []
