"""Every solver phase's part of the time, in one place (the shape is ``solver.budget.Budget``).

A ``*_SHARE`` is a fraction of a parent budget (of the time left, ``Budget.split``, unless its
comment says of the whole, ``Budget.first``); a ``*_SECONDS`` is a cap (``Budget.within``) or a
floor (``Budget.at_least``) in seconds. ``tests/solver/test_shares.py`` checks that no bare time
share is written anywhere else.
"""

from __future__ import annotations

from kubeplace.models.preempt_rows import Stage

# --- solver.solve: one placement solve ---------------------------------------------------
PART_MIN_SECONDS = 0.2
"""Floor of an independent part's budget: a tiny part still gets a backend call."""
GUIDED_SHARE = 0.2
"""Of the whole limit, for the guided greedy's kind LP (at most GUIDED_SECONDS): a cheap hint."""
GUIDED_SECONDS = 3.0
LP_BOUND_SHARE = 0.1
"""Of the whole limit, for the kind LP bound (at least LP_BOUND_MIN_SECONDS): the bound lets a
solve stop early, so it is worth a little time even on a short limit."""
LP_BOUND_MIN_SECONDS = 1.0
LP_BOUND_DEFAULT_SECONDS = 10.0
"""The LP bound's limit when its caller gives none (tests, reports)."""
WHOLE_PLACE_SHARE = 0.5
"""Of the time left, for stage one (place) of the whole model; stage two (objective) has the rest."""
MIN_LEFT_SECONDS = 0.1
"""Below this left, no further backend call is started (it could not answer)."""
SLICE_MIN_SECONDS = 0.05
"""Floor of one backend call's slice."""
REPAIR_SHARE = 0.5
"""Of the time left, that ruin and recreate may spend on gangs left out."""
REPAIR_ROUNDS_PER_SECOND = 20
"""With one worker the repair is counted in rounds (about this many per second of budget on the
300-node gang benchmark), not by the clock, so runs repeat exactly."""
PATTERN_SHARE = 0.6
"""Of the time left, for column generation over node patterns (the LNS has the rest)."""

# --- solver.lns: large-neighbourhood search ------------------------------------------------
LNS_PLACE_SECONDS = 2.0
"""One place round's CP-SAT call, at most."""
LNS_OBJECTIVE_SECONDS = 0.12
"""One objective round's call, at most: many short rounds improve the balance term most."""
LNS_MIN_SECONDS = 0.1
"""The LNS stops with less left."""
LNS_LEFT_GUARD_SECONDS = 1e-3
"""A round's share is its seconds over what is left, at least this (never a division by zero)."""

# --- the floors of one library call (HiGHS, CP-SAT) in column generation and pricing ---------
HIGHS_LP_MIN_SECONDS = 0.05
"""A master LP's limit, at least (patterns, cutting stock): re-solving after new columns is quick."""
HIGHS_MIP_MIN_SECONDS = 0.1
"""A MIP over the columns, at least: its answer (even the hint back) is needed."""
PRICING_MIN_SECONDS = 0.01
"""One CP-SAT pricing call, at least."""

# --- solver.patterns: column generation over node patterns ---------------------------------
PRICE_SECONDS = 0.15
"""CP-SAT limit of one pricing call: short, as any improving column will do."""
BOUND_SHARE = 0.8
"""Of the time left, that a bound pass may use."""
BOUND_PASS_MIN_SECONDS = 0.1
"""Floor of one kind's bound-pass pricing call."""
PATTERN_MIP_SHARE = 0.25
"""Of the whole, kept for the MIP over the generated columns and the completion."""
PATTERN_END_SHARE = 0.95
"""Of the whole, by which the MIP and the completions (FILL_SECONDS) must be done: a margin."""
FILL_SECONDS = 1.0
"""Time one completion (patterns onto nodes, then the greedy on the rest) takes at most."""

# --- solver.cutting_stock_columns / cutting_stock_exact: provisioning's nodes ---------------
ENUMERATION_SHARE = 0.2
"""Of the whole, the enumeration of maximal patterns may take."""
LP_SHARE = 0.5
"""Of the whole, the column generation may use; the MIP has the rest."""
AGGREGATED_SHARE = 0.15
"""Of the whole, the aggregated MIP's bound takes from the column generation's (at most
AGGREGATED_SECONDS)."""
AGGREGATED_SECONDS = 5.0
"""Time the aggregated MIP's bound may take at most."""
AGGREGATED_MIN_SECONDS = 0.1
"""The aggregated MIP is not started with less left."""
EXACT_SHARE = 0.3
"""Of the whole, kept from the MIP for the exact model, when the batch is small enough for it."""
EXACT_MIN_SECONDS = 0.05
"""The exact model is not started with less left."""
KNAPSACK_SECONDS = 0.05
"""Time one integer pricing knapsack may take (its bound serves beyond)."""

# --- plan --preempt (plan.preemption_plan) and solver.solve_preemption -----------------------
PREEMPTION_SOLVE_MIN_SECONDS = 1.0
"""plan --preempt's time limit is one budget: the plan without preemption has it (and ends sooner
once proved), the preemption solve what that plan leaves, at least this (its greedy and its stages
must get some time to answer). Before, the preemption solve had a whole limit of its own after the
plan."""
PREEMPTION_SHARES = {Stage.PLACE: 0.35, Stage.HIGHEST: 0.15, Stage.BUDGETS: 0.1, Stage.VICTIMS: 0.15,
                     Stage.TERMS: 0.25}
"""Part of the time limit each exact stage may take (what a stage leaves goes to the next): of the
time left, its share of the stages from it on (the place share split between the weight stages left)."""
PREEMPTION_GREEDY_SHARE = 0.3
"""Of the whole, the greedy preemption may take (the preemptors it has not tried by then stay out
of its answer; the exact stages may still place them)."""
PREEMPTION_MIN_SECONDS = 0.2
"""Floor of one exact stage's call."""

# --- plan.provision: plan --provision ------------------------------------------------------
PROVISION_STAGE_SHARES = (0.25, 0.6, 0.3)
"""Parts of the time limit: stage A (of the whole); the provisioning model, of the time left when
it starts (45% of the whole after stage A, 60% without existing nodes); each plan on the grown
cluster, at most (of the whole)."""
PROVISION_OBJECTIVE_SHARE = 0.25
"""With this part of the time limit left, a last plan on the grown cluster spends
PROVISION_OBJECTIVE_PASS_SHARE of what is left on the profile's objective."""
PROVISION_OBJECTIVE_PASS_SHARE = 0.5
PROVISION_MIN_SECONDS = 0.5
"""The least time one plan on the grown cluster (and one provisioning round) is given."""

# --- serve: one scheduling cycle (ServeSettings' defaults) ------------------------------------
CYCLE_BASE_SECONDS = 0.5
CYCLE_SECONDS_PER_POD = 0.002
"""A cycle's solver budget: CYCLE_BASE_SECONDS + CYCLE_SECONDS_PER_POD x its pending pods, at most
the configured time limit: a small batch binds at once, a large one gets time to pack."""

# --- rebalance: moves and consolidation ----------------------------------------------------
MOVES_FIRST_SHARE = 0.6
"""Of the whole, a lexicographic rebalance's stage one (the goal); stage two (fewest moves) has what is left."""
MOVES_WEIGHTED_SHARE = 1.0
"""Of the whole, a weighted rebalance's one stage (goal and move cost together)."""
MOVES_MIN_SECONDS = 0.1
"""Floor of one rebalance backend call."""
CONSOLIDATE_REPLACE_SHARE = 0.5
"""With --replace, of the whole for each answer: the one that only removes, the one that adds."""
CONSOLIDATE_COST_SHARE = 0.5
"""Of a cut round's time (what is left when it starts), stage one (cost)."""
CONSOLIDATE_EVICTIONS_SHARE = 0.3
"""Of a cut round's time, stage two (evictions at that cost); the replan has the rest."""
CONSOLIDATE_ROUND_MIN_SECONDS = 0.5
"""Floor of a cut round."""
CONSOLIDATE_REPLAN_MIN_SECONDS = 1.0
"""Floor of the replan of the removed nodes' pods: it must answer for the removal to count."""
