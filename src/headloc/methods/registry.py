"""The registry: every :class:`~headloc.methods.contract.Method` that a module of
:mod:`headloc.methods` declares in its ``METHODS`` tuple, found the way scikit-learn's
``all_estimators()`` finds estimators, so that adding a method is adding a module.

It reads the package's folder instead of importing the package, so that the steps
(:mod:`headloc.methods.steps`, :mod:`headloc.methods.kinds`) can ask it for a method while the
package imports them.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from headloc.methods.contract import Method
from headloc.methods.kinds import plugin_modules

# The package's modules that run methods instead of declaring them (and its sub-packages: the kinds).
MACHINERY = ("contract", "driver", "one_job", "reads", "record", "registry", "rules", "settings", "steps")
_REGISTRY: dict[str, Method] = {}


def registry() -> dict[str, Method]:
    """Every method of every module of this package, by name, in module order, then those of the
    plugins' modules (the ``headloc.methods`` entry-point group: :func:`headloc.methods.kinds.plugin_modules`)."""
    if not _REGISTRY:
        for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
            if module.name in MACHINERY or module.ispkg:
                continue
            for method in importlib.import_module(f"headloc.methods.{module.name}").METHODS:
                if method.name in _REGISTRY:
                    raise ValueError(f"search method {method.name!r} declared twice (in {module.name})")
                _REGISTRY[method.name] = method
        for module in plugin_modules():
            for method in getattr(module, "METHODS", ()):
                if method.name in _REGISTRY:
                    raise ValueError(f"search method {method.name!r} of plugin {module.__name__} is already "
                                     "declared; give it another name")
                _REGISTRY[method.name] = method
    return _REGISTRY


def names(*, kind: str | None = None, budgeted: bool | None = None) -> list[str]:
    """The registered methods' names: of one kind only, if given by name; only those that spend a
    budget of masks (search.n_masks, search.budgets), or only those that do not, if ``budgeted``."""
    from headloc.methods.kinds import get as kind_of

    wanted = None if kind is None else kind_of(kind)
    return [name for name, method in registry().items() if (wanted is None or method.kind is wanted)
            and (budgeted is None or method.budgeted == budgeted)]


def get(name: str) -> Method:
    """A method by name; ValueError naming the known ones if there is none."""
    try:
        return registry()[name]
    except KeyError:
        raise ValueError(f"unknown search method {name!r}; known: {', '.join(registry())}") from None
