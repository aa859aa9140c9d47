"""Loading a spec from YAML: the only place that knows file syntax.

Every YAML and JSON file aifabric reads as input (specs, scenarios, sweep files, goodput
scenarios, collected facts, run records) goes through :func:`load_yaml` or
:func:`load_json`: safe, and a key given twice in one mapping is an error with its line
(PyYAML would keep the last one silently).

**Bounded** (docs/spec.md, Limits), checked while the document is parsed, before anything
is built or validated from it:

* a file is at most :func:`max_input_bytes` (64 MiB; ``AIFABRIC_MAX_INPUT_BYTES``);
* YAML nests at most :data:`MAX_DEPTH` levels, counted with aliases expanded;
* YAML aliases add at most :data:`MAX_ALIAS_NODES` nodes: each ``*alias`` counts the nodes
  of what it stands for, aliases inside included (a "billion laughs" document is refused
  at its first few lines instead of expanding in memory); an alias inside what it names
  (a recursive document) is refused too;
* JSON nests as deep as Python's parser allows (about 1,000 levels); it has no aliases.

Every failure becomes a :class:`~aifabric.errors.SpecError` with one problem per
field, naming the file, the field path and what is allowed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.composer import Composer

from aifabric.errors import Problem, SpecError
from aifabric.spec.models import Spec
from aifabric.spec.problems import problems_from_validation

__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "MAX_INPUT_BYTES", "DuplicateKeyError",
           "FastStrictLoader", "StrictLoader", "dump_spec", "json_no_duplicates",
           "load_json", "load_spec", "load_yaml", "max_input_bytes", "read_input",
           "spec_from_dict", "yaml_error"]

#: the largest input file read, by default (``AIFABRIC_MAX_INPUT_BYTES`` changes it)
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: the deepest nesting of a YAML document (aliases expanded)
MAX_DEPTH = 100
#: the nodes YAML aliases may add to a document, all aliases together (each counted with
#: the nodes of what it stands for)
MAX_ALIAS_NODES = 100_000
_SIZE_ENV = "AIFABRIC_MAX_INPUT_BYTES"


def max_input_bytes() -> int:
    """The size limit of an input file: ``AIFABRIC_MAX_INPUT_BYTES`` (``8M``, ``1G``, ...;
    0: no limit), else :data:`MAX_INPUT_BYTES`."""
    env = os.environ.get(_SIZE_ENV)
    if not env:
        return MAX_INPUT_BYTES
    from aifabric.spec.units import parse_size

    return parse_size(env, _SIZE_ENV, memory=True)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def read_input(path: str | Path) -> str:
    """The text of an input file, refused (a SpecError naming the file) when it is missing,
    not a file, unreadable, not UTF-8 or larger than :func:`max_input_bytes`."""
    p = Path(path)
    name = str(path)
    limit = max_input_bytes()
    try:
        if not p.exists():
            raise SpecError(Problem("", "file not found", name))
        if not p.is_file():
            raise SpecError(Problem("", "not a file", name))
        with p.open("rb") as fh:
            data = fh.read(limit + 1) if limit else fh.read()
        if limit and len(data) > limit:
            raise SpecError(Problem("", f"larger than the input limit of {_mib(limit)}; "
                                    f"allowed: a smaller file, or a higher limit in "
                                    f"{_SIZE_ENV} (e.g. {_SIZE_ENV}=256M)", name))
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(Problem("", f"cannot read: {exc}", name)) from None


def _check_unique(node: yaml.MappingNode, construct: Any) -> None:
    """A key twice in one mapping is an error (PyYAML keeps the last silently)."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<:`` merges may override
            continue
        key = construct(key_node)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the constructor reports it
            continue
        if first is None:
            seen[key] = key_node.start_mark.line
            continue
        raise yaml.constructor.ConstructorError(
            None, None, f"duplicate key {key!r} (first on line {first + 1}); allowed: "
            "each key once in a mapping", key_node.start_mark)


class _Bounded(Composer):
    """PyYAML's composer, bounding nesting while it composes (no recursion past
    :data:`MAX_DEPTH`, so no stack overflow either) and, in a document with anchors,
    alias expansion once the nodes are composed, before anything is constructed: composing
    keeps an alias as a reference, so a "billion laughs" document composes in a few
    nodes, and the count below visits each node once."""

    _af_depth = 0

    def compose_document(self) -> Any:
        self.get_event()  # the document start
        node = self.compose_node(None, None)
        self.get_event()  # the document end
        anchored = bool(self.anchors)
        self.anchors = {}
        if anchored:
            _check_expansion(node)
        return node

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._af_depth += 1
        try:
            if self._af_depth > MAX_DEPTH:
                _too_deep(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._af_depth -= 1


def _too_deep(mark: Any) -> None:
    raise yaml.composer.ComposerError(
        None, None, f"nested deeper than {MAX_DEPTH} levels; allowed: at most {MAX_DEPTH} "
        "levels of nesting (aliases expanded)", mark)


@contextmanager
def _libyaml_depth() -> Iterator[None]:
    """libyaml's own nesting limit as this module's: newer libyaml builds (PyYAML 6.0.4's
    wheels) stop a scan at 1,000 open flow levels ("exceeded maximum nesting depth"),
    which can come before the composer reaches :data:`MAX_DEPTH`; either way the
    document is nested too deep, and it is said one way."""
    try:
        yield
    except yaml.MarkedYAMLError as err:
        if "maximum nesting depth" in (err.problem or ""):
            _too_deep(err.problem_mark)
        raise


def _kids(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def _check_expansion(root: Any) -> None:
    """Refuse a composed document whose aliases add more than :data:`MAX_ALIAS_NODES`
    nodes, nest deeper than :data:`MAX_DEPTH` once expanded, or contain what they name.
    An iterative walk, each node once (sizes memoized: an alias is a second reference to
    its node), so its cost is the document's own nodes however far aliases expand."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    distinct = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        k = id(node)
        if done:
            kids = _kids(node)
            size[k] = 1 + sum(size[id(c)] for c in kids)
            height[k] = h = 1 + max((height[id(c)] for c in kids), default=0)
            on_path.discard(k)
            distinct += 1
            if h > MAX_DEPTH:
                _too_deep(node.start_mark)
            if size[k] - distinct > MAX_ALIAS_NODES:  # a lower bound of what aliases add
                _bomb(node.start_mark)
            continue
        if k in size:
            continue
        if k in on_path:
            raise yaml.composer.ComposerError(
                None, None, "an alias inside what it names (a recursive document); allowed: "
                "aliases of nodes that do not contain them", node.start_mark)
        on_path.add(k)
        stack.append((node, True))
        stack.extend((c, False) for c in _kids(node) if id(c) not in size)
    if size[id(root)] - distinct > MAX_ALIAS_NODES:
        _bomb(root.start_mark)


def _bomb(mark: Any) -> None:
    raise yaml.composer.ComposerError(
        None, None, f"aliases expand to more than {MAX_ALIAS_NODES:,} further nodes (an "
        f"alias bomb?); allowed: aliases adding at most {MAX_ALIAS_NODES:,} nodes in all",
        mark)


class StrictLoader(_Bounded, yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys (with the line of each), bounded
    (module doc)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            _check_unique(node, lambda n: self.construct_object(n, deep=True))
        return super().construct_mapping(node, deep=deep)


try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _CParser = None
if _CParser is not None:
    class FastStrictLoader(_CParser, _Bounded,  # type: ignore[misc]
                           yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """:class:`StrictLoader` on libyaml's parser where available (large inventories):
        libyaml reads the events, the bounded composer above builds the nodes (libyaml's
        own composer recurses without a limit: a deep document overflows its stack)."""

        def __init__(self, stream: Any) -> None:
            _CParser.__init__(self, stream)
            Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

        # the Python composer's methods, not the C parser's own
        check_node = Composer.check_node
        compose_document = _Bounded.compose_document

        def get_node(self) -> Any:
            with _libyaml_depth():
                return Composer.get_node(self)

        def get_single_node(self) -> Any:
            with _libyaml_depth():
                return Composer.get_single_node(self)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                _check_unique(node, lambda n: self.construct_object(n, deep=True))
            return super().construct_mapping(node, deep=deep)
else:  # pragma: no cover - PyYAML without libyaml
    FastStrictLoader = StrictLoader  # type: ignore[misc]


def yaml_error(exc: yaml.YAMLError, kind: str = "YAML") -> str:
    """``invalid YAML: line L, column C: what`` for a PyYAML error."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"invalid {kind}: {where}{reason}"


class DuplicateKeyError(ValueError):
    """A JSON object with a key twice."""


def json_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads` refusing duplicate keys."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKeyError(f"duplicate key {k!r}; allowed: each key once in an "
                                        "object")
            seen.add(k)
    return out


def spec_from_dict(data: Any, file: str | None = None) -> Spec:
    """Validate a parsed YAML/JSON document into a :class:`Spec`."""
    if not isinstance(data, dict):
        raise SpecError(Problem("", f"a spec must be a mapping, got {type(data).__name__}", file))
    try:
        return Spec.model_validate(data)
    except ValidationError as err:
        raise SpecError(problems_from_validation(err, Spec, file)) from None


def load_yaml(path: str | Path, *, fast: bool = False, kind: str = "YAML") -> Any:
    """Parse a YAML file, turning every I/O or syntax failure, a key given twice in one
    mapping and a document past the limits (module doc) into a SpecError naming the file
    and line. ``fast``: libyaml's parser (large inventories); ``kind``: the syntax the
    messages name."""
    name = str(path)
    text = read_input(path)
    try:
        return yaml.load(text, Loader=FastStrictLoader if fast else StrictLoader)  # safe
    except yaml.YAMLError as exc:
        raise SpecError(Problem("", yaml_error(exc, kind), name)) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH keeps far below the limit
        raise SpecError(Problem("", f"invalid {kind}: nested too deeply; allowed: at most "
                                f"{MAX_DEPTH} levels", name)) from None


def load_json(path: str | Path) -> Any:
    """Parse a JSON file (a key twice in one object refused), bounded in size (module doc);
    every failure a SpecError naming the file."""
    name = str(path)
    text = read_input(path)
    try:
        return json.loads(text, object_pairs_hook=json_no_duplicates)
    except json.JSONDecodeError as exc:
        raise SpecError(Problem("", f"invalid JSON: line {exc.lineno}, column {exc.colno}: "
                                f"{exc.msg}", name)) from None
    except DuplicateKeyError as exc:
        raise SpecError(Problem("", f"invalid JSON: {exc}", name)) from None
    except RecursionError:
        raise SpecError(Problem("", "invalid JSON: nested deeper than Python's parser allows "
                                "(about 1,000 levels); allowed: less nesting", name)) from None


def load_spec(path: str | Path) -> Spec:
    """Read and validate the spec at ``path``."""
    return spec_from_dict(load_yaml(path), str(path))


def dump_spec(spec: Spec) -> str:
    """The spec as YAML, loadable by :func:`load_spec` (defaults left out)."""
    data = spec.model_dump(mode="json", exclude_defaults=True)
    data["topology"] = {"family": spec.topology.family,
                        **spec.topology.model_dump(mode="json", exclude_defaults=True)}
    return yaml.safe_dump(data, sort_keys=False)
