"""The API server's limits on a CEL device selector, checked before the CEL library sees it.

The API server refuses a selector longer than 10 KiB (``Too long: may not be more than 10240
bytes``) without compiling it, and one whose estimated worst-case cost exceeds
``CELSelectorExpressionMaxCost`` (``Forbidden: too complex, exceeds cost limit``); its parser refuses
nesting deeper than 250 (``max recursion depth exceeded``). The CEL library kubeplace evaluates
with cannot be interrupted and has no cost estimator, and it overflows its stack on deep
expressions, so these limits are what keep one selector from crashing or hanging the process.

:func:`check` parses the expression itself (a recursive-descent CEL parser, nesting bounded) and
computes, in the same pass, a conservative worst case: every value gets a :class:`Shape` (its
most elements, entries or characters, and its elements' shape), a comprehension costs its
range's size times its body, and data-proportional operations (equality, ``in``, concatenation,
string functions) cost the sizes of their operands. The ``device`` variable is as large as the
API server lets a device be (32 attributes and capacities, values of 64 characters). So an
expression passing the check evaluates within about a million steps, whatever the device.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

MAX_LENGTH = 10 * 1024
"""resource.CELSelectorExpressionMaxLength (bytes)."""
MAX_COST = 1_000_000
"""resource.CELSelectorExpressionMaxCost."""
MAX_DEPTH = 250
"""cel-go's parser default maxRecursionDepth (the API server keeps it)."""
MAX_NESTING = 64
"""Brackets, macros and calls nested in one another (the CEL library's own parser gives up below
100); it also bounds this parser's Python recursion."""
TOO_LONG = f"Too long: may not be more than {MAX_LENGTH} bytes"
TOO_COMPLEX = "Forbidden: too complex, exceeds cost limit"
TOO_DEEP = "max recursion depth exceeded"

_MAX_ENTRIES = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
_MAX_VALUE = 64  # DeviceAttributeMaxValueLength
_MAX_DOMAIN = 63  # DeviceMaxDomainLength
_MAX_ID = 32  # DeviceMaxIDLength
_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})


class LimitError(ValueError):
    """An expression over one of the API server's limits (the message is the API server's)."""


class TooDeep(LimitError):
    """Nested deeper than the parser allows: a compile error for the API server."""


@dataclass(frozen=True)
class Shape:
    """The most a value may hold: ``size`` elements (list), entries (map) or characters (string,
    bytes; 1 for a scalar), each element (or map value) at most ``elem``, each key at most
    ``key``; an object's ``fields`` by name."""

    size: int = 1
    elem: Shape | None = None
    key: Shape | None = None
    fields: Mapping[str, Shape] = field(default_factory=dict)
    is_map: bool = False
    """Certainly a map (not a list): iterating it gives its keys."""

    @property
    def flat(self) -> int:
        """Everything in it, nested values included: the cost of a pass over it."""
        inner = (self.elem.flat if self.elem else 0) + (self.key.flat if self.key else 0)
        return min(self.size * (1 + inner) + sum(f.flat for f in self.fields.values()), 10**12)

    @property
    def member(self) -> Shape:
        """What an iteration variable over it holds: a map's key, a list's element (either when
        it may be both)."""
        return join(self.key, None) if self.is_map else join(self.elem, self.key)


SCALAR = Shape()


def join(a: Shape | None, b: Shape | None) -> Shape:
    """The smallest shape holding both."""
    if a is None or b is None:
        return a or b or SCALAR
    fields = {k: join(a.fields.get(k), b.fields.get(k)) for k in {*a.fields, *b.fields}}
    elem = join(a.elem, b.elem) if a.elem or b.elem else None
    key = join(a.key, b.key) if a.key or b.key else None
    return Shape(max(a.size, b.size), elem, key, fields, a.is_map and b.is_map)


_VALUE = Shape(_MAX_VALUE, SCALAR)  # a string of 64 characters, or a version (a list of 3)


def device_shape(literals: int) -> Shape:
    """The ``device`` variable at its largest, for an expression with that many string literals
    (``kube.device_cel`` gives the attribute and capacity maps an empty domain for each)."""
    domains = Shape(_MAX_ENTRIES + literals, Shape(_MAX_ENTRIES, _VALUE, Shape(_MAX_ID), is_map=True),
                    Shape(_MAX_DOMAIN), is_map=True)
    return Shape(4, fields={"driver": Shape(_MAX_DOMAIN), "allowMultipleAllocations": SCALAR,
                            "attributes": domains, "capacity": domains})


@dataclass(frozen=True)
class Node:
    """A parsed subexpression: its worst-case cost, the shape of its value, its tree depth."""

    cost: int
    shape: Shape = SCALAR
    depth: int = 1


_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>[rRbB]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||\?\.|\?\[|[-+*/%<>!?:.,()\[\]{}])
""", re.VERBOSE | re.DOTALL)
_BINARY = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "in": 3,
           "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}
_CHEAP_CALLS = frozenset({"has", "size", "type"})
"""Calls whose cost does not grow with their argument."""
_SCALAR_CALLS = frozenset({"int", "uint", "double", "bool", "type", "duration", "timestamp", "quantity",
                           "compareTo", "isGreaterThan", "isLessThan", "asInteger", "isInteger",
                           "asApproximateFloat", "add", "sub", "sign", "major", "minor", "patch",
                           "startsWith", "endsWith", "contains"})


class _Syntax(ValueError):
    """Not an expression this parser reads (the CEL library's parser words the error)."""


def _tokens(expression: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(expression):
        found = _TOKEN.match(expression, position)
        if found is None or found.lastgroup is None:
            raise _Syntax(f"unexpected character at {position}")
        position = found.end()
        if found.lastgroup != "space":
            yield found.lastgroup, found.group()


def _literal_size(text: str) -> int:
    body = text.lstrip("rRbB")
    quote = 3 if body[:3] in ('"""', "'''") else 1
    return max(1, len(body) - 2 * quote)


class _Parser:
    """Recursive descent over CEL's grammar, each rule returning its :class:`Node`."""

    def __init__(self, expression: str) -> None:
        self.tokens = [*_tokens(expression), ("end", "")]
        self.at = 0
        self.nesting = 0
        literals = sum(kind == "string" for kind, _ in self.tokens)
        self.scopes: list[dict[str, Shape]] = [{"device": device_shape(literals)}]

    def peek(self, offset: int = 0) -> str:
        return self.tokens[min(self.at + offset, len(self.tokens) - 1)][1]

    def kind(self) -> str:
        return self.tokens[self.at][0]

    def take(self, expected: str | None = None) -> str:
        kind, text = self.tokens[self.at]
        if kind == "end" or (expected is not None and text != expected):
            raise _Syntax(f"expected {expected or 'more'}, found {text or 'the end'}")
        self.at += 1
        return text

    def parse(self) -> Node:
        node = self.expr()
        if self.kind() != "end":
            raise _Syntax(f"unexpected {self.peek()}")
        return node

    def nested(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise TooDeep(TOO_DEEP)

    def expr(self) -> Node:
        self.nested()
        condition = self.binary(1)
        if self.peek() == "?":
            self.take()
            a = self.binary(1)
            self.take(":")
            b = self.expr()
            condition = _node(condition.cost + a.cost + b.cost + 1, join(a.shape, b.shape),
                              condition, a, b)
        self.nesting -= 1
        return condition

    def binary(self, lowest: int) -> Node:
        left = self.unary()
        while (level := _BINARY.get(self.peek(), 0)) >= lowest and level:
            operator = self.take()
            right = self.binary(level + 1)
            left = _binary(operator, left, right)
        return left

    def unary(self) -> Node:
        run = 0
        while self.peek() in ("!", "-"):
            self.take()
            run += 1
        operand = self.member()
        return Node(operand.cost + run, SCALAR, operand.depth) if run else operand  # a run is one level

    def member(self) -> Node:
        node = self.primary()
        while self.peek() in (".", "?.", "[", "?["):
            if self.take() in (".", "?."):
                name = self.take()
                if self.peek() == "{":  # a qualified message name's literal: refused when run
                    node = self.literal("{", "}", pairs=True)
                    continue
                node = self.call(name, node) if self.peek() == "(" else _node(
                    node.cost + 1, node.shape.fields.get(name) or node.shape.elem or SCALAR, node)
            else:
                index = self.expr()
                self.take("]")
                node = _node(node.cost + index.cost + 1, node.shape.elem or SCALAR, node, index)
        return node

    def primary(self) -> Node:
        kind, text = self.tokens[self.at]
        if kind in ("number", "string"):
            self.take()
            return Node(1, Shape(_literal_size(text)) if kind == "string" else SCALAR)
        if text == ".":
            self.take()
            return self.primary()
        if kind == "ident":
            self.take()
            if self.peek() == "(":
                return self.call(text, None)
            if self.peek() == "{":
                return self.literal("{", "}", pairs=True)  # a message literal: refused when run
            shape = next((s[text] for s in reversed(self.scopes) if text in s), SCALAR)
            return Node(1, shape)
        if text == "(":
            self.take()
            inner = self.expr()
            self.take(")")
            return inner
        if text == "[":
            return self.literal("[", "]", pairs=False)
        if text == "{":
            return self.literal("{", "}", pairs=True)
        raise _Syntax(f"unexpected {text or 'end'}")

    def literal(self, opening: str, closing: str, pairs: bool) -> Node:
        self.take(opening)
        self.nested()
        items: list[Node] = []
        keys: list[Node] = []
        while self.peek() != closing:
            if self.peek() == "?":
                self.take()
            if pairs:
                keys.append(self.expr())
                self.take(":")
            items.append(self.expr())
            if self.peek() != ",":
                break
            self.take(",")
        self.take(closing)
        self.nesting -= 1
        elem = _join_all(n.shape for n in items) if items else None
        key = _join_all(n.shape for n in keys) if keys else None
        return _node(1 + sum(n.cost for n in (*items, *keys)), Shape(max(1, len(items)), elem, key, is_map=pairs),
                     *items, *keys)

    def call(self, name: str, target: Node | None) -> Node:
        self.take("(")
        self.nested()
        if target is not None and name in _COMPREHENSIONS and self.kind() == "ident" and self.peek(1) == ",":
            node = self.comprehension(name, target)
        else:
            args = [self.expr()] if self.peek() != ")" else []
            while self.peek() == ",":
                self.take(",")
                args.append(self.expr())
            self.take(")")
            node = _call(name, [*([target] if target else []), *args])
        self.nesting -= 1
        return node

    def comprehension(self, name: str, target: Node) -> Node:
        variable = self.take()
        self.take(",")
        scope = {variable: target.shape.member}
        if name != "map" and self.kind() == "ident" and self.peek(1) == ",":  # all(k, v, ...): key and value
            scope = {variable: join(target.shape.key, SCALAR), self.take(): join(target.shape.elem, None)}
            self.take(",")
        self.scopes.append(scope)
        parts = [self.expr()]
        while self.peek() == ",":
            self.take(",")
            parts.append(self.expr())
        self.take(")")
        self.scopes.pop()
        size = target.shape.size
        cost = target.cost + size * (sum(p.cost for p in parts) + 2)
        if name == "map":
            shape = Shape(size, parts[-1].shape)
        elif name == "filter":
            shape = Shape(size, target.shape.member)
        else:
            shape = SCALAR
        return _node(cost, shape, target, *parts)


def _join_all(shapes: Iterator[Shape]) -> Shape:
    out: Shape | None = None
    for shape in shapes:
        out = join(out, shape)
    return out or SCALAR


def _node(cost: int, shape: Shape, *children: Node) -> Node:
    depth = 1 + max((c.depth for c in children), default=0)
    if depth > MAX_DEPTH:
        raise TooDeep(TOO_DEEP)
    return Node(min(cost, 10**15), shape, depth)


def _binary(operator: str, a: Node, b: Node) -> Node:
    if operator in ("&&", "||"):
        # cel-go balances a chain of these: it is as deep as its deepest operand, plus log2 of its length
        return Node(a.cost + b.cost + 1, SCALAR, max(a.depth, b.depth) + (1 if a.depth == b.depth else 0))
    cost = a.cost + b.cost + 1
    if operator == "+":
        elem = join(a.shape.elem, b.shape.elem) if a.shape.elem or b.shape.elem else None
        key = join(a.shape.key, b.shape.key) if a.shape.key or b.shape.key else None
        shape = Shape(a.shape.size + b.shape.size, elem, key)
        return _node(cost + a.shape.flat + b.shape.flat, shape, a, b)
    if operator == "in":
        return _node(cost + b.shape.flat, SCALAR, a, b)
    if operator in ("==", "!=", "<", "<=", ">", ">="):
        return _node(cost + min(a.shape.flat, b.shape.flat), SCALAR, a, b)
    return _node(cost, SCALAR, a, b)


def _call(name: str, args: list[Node]) -> Node:
    cost = 1 + sum(a.cost for a in args)
    if name in _CHEAP_CALLS:
        return _node(cost, SCALAR, *args)
    sizes = [a.shape.flat for a in args]
    if name == "matches" and len(args) == 2:
        return _node(cost + sizes[0] * sizes[1], SCALAR, *args)
    cost += sum(sizes)
    if name == "dyn" and len(args) == 1:
        return _node(cost, args[0].shape, *args)
    if name == "semver":
        return _node(cost, Shape(3, SCALAR), *args)
    if name in ("string", "bytes"):
        return _node(cost, Shape(max([20, *sizes])), *args)
    if name in _SCALAR_CALLS:
        return _node(cost, SCALAR, *args)
    return _node(cost, _join_all(a.shape for a in args), *args)  # unknown: refused when run


def check(expression: str) -> bool:
    """LimitError (the API server's message) when the expression is over a limit; whether it
    was read at all (False: not CEL this parser reads, so its cost is unknown; the caller lets
    the CEL library's parser word the error, and refuses it if that parser reads it)."""
    if len(expression.encode()) > MAX_LENGTH:
        raise LimitError(TOO_LONG)
    try:
        node = _Parser(expression).parse()
    except _Syntax:
        return False
    if node.cost > MAX_COST:
        raise LimitError(TOO_COMPLEX)
    return True
