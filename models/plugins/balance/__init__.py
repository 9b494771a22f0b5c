"""Balance: the ``balance`` profile's objective score (``plugin``); a SCORE rule, no verifier."""

from __future__ import annotations

from kubeplace.models.framework import SCORE
from kubeplace.models.plugins.balance.plugin import NAME, Balance, BalanceArgs, ResourceWeight, build_balance
from kubeplace.models.rules import rule

RULE = rule(NAME, SCORE, BalanceArgs, build_balance, default=False)

__all__ = ["NAME", "RULE", "Balance", "BalanceArgs", "ResourceWeight", "build_balance"]
