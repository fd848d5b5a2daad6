"""The layers' scopes composed into one agent's policy, in each reading this node judges by.

Ours; pi 20.7.3's (`pi_reading`), and pi's reading composed with the family fold 20.7.3 does not
know (`pi_directional`, for asks on a directional surface). The scopes come from the store
(`core.rules.config`), which loads, caches and gates them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.rules.policy import GLOBAL, Policy, compose
from core.rules.scopes import Scope
from core.rules.sources import AUTHORIZER, Sources, reading


class ScopeOf(Protocol):
    """The store's scope of one file: our reading, with pi's attached."""

    def __call__(self, origin: str, path: Path, *, agent_file: bool) -> Scope: ...


@dataclass(frozen=True, slots=True)
class Layers:
    """Composes policies from the scopes `scope_of` hands out for `sources`."""

    sources: Sources
    scope_of: ScopeOf
    home: str

    def both(self, agent_name: str, reason: str | None, *, include_agent_files: bool) -> Policy:
        """Our reading of the layers, with pi's readings attached."""
        ours = self.compose(agent_name, reason, include_agent_files=include_agent_files, as_pi=False)
        return self.with_pi(ours, agent_name, reason, include_agent_files=include_agent_files)

    def with_pi(self, ours: Policy, agent_name: str, reason: str | None, *, include_agent_files: bool,
                agent_scopes: list[Scope] | None = None) -> Policy:
        """`ours` with pi 20.7.3's reading attached, and pi's reading of the files composed with
        the family fold (which 20.7.3 does not know), for asks on a directional surface."""
        pi = self.compose(agent_name, reason, include_agent_files=include_agent_files,
                          as_pi=True, agent_scopes=agent_scopes)
        directional = self.compose(agent_name, reason, include_agent_files=include_agent_files,
                                   as_pi=True, agent_scopes=agent_scopes, fold_families=True)
        return dataclasses.replace(ours, pi_reading=pi, pi_directional=directional,
                                   pi_differs=_signature(pi) != _signature(ours))

    def compose(
        self, agent_name: str, reason: str | None, *, include_agent_files: bool, as_pi: bool,
        agent_scopes: list[Scope] | None = None, fold_families: bool = False,
    ) -> Policy:
        """One reading of the layers, lowest first (`agent_scopes` replaces the agent files); with
        the `--rules` layer, the same reading without it is attached (`Policy.others`)."""
        configs = {o: reading(self.scope_of(o, p, agent_file=False), as_pi)
                   for o, p in self.sources.config_paths().items()}
        layers = [configs[GLOBAL]]
        if "project" in configs:
            layers.append(configs["project"])
        if agent_scopes is not None:
            layers += agent_scopes
        elif include_agent_files:
            layers += [reading(self.scope_of(o, p, agent_file=True), as_pi)
                       for o, p in self.sources.agent_paths(agent_name)]
        below = list(layers)
        if AUTHORIZER in configs:
            layers.append(configs[AUTHORIZER])
        settings_layers = [s for s in layers if s.origin in configs and not s.invalid]
        policy = compose(agent_name, reason, layers, settings_layers, self.home, as_pi=as_pi,
                         fold_families=fold_families)
        if AUTHORIZER not in configs:
            return policy

        def others() -> Policy:  # the very scopes above, without the `--rules` layer
            return compose(agent_name, reason, below,
                           [s for s in settings_layers if s is not configs[AUTHORIZER]],
                           self.home, as_pi=as_pi, fold_families=fold_families)
        return dataclasses.replace(policy, without_authorizer=others)


def _signature(policy: Policy) -> tuple[object, ...]:
    """What decides a verdict and its provenance: the effective rules in order, as compiled."""
    return (policy.folds, *((r.surface, r.pattern, r.action, r.origin, r.layer, r.reason,
                             r.pattern_wildcard.expanded, r.surface_wildcard.expanded)
                            for r in policy.effective_rules))
