"""The visual report of a plan or a rebalance: one self-contained HTML file (``--report FILE``).

Utilisation per node before and after (aggregated per node pool), the GPU device map, unplaced
pods by reason, moves, and the solver's incumbent and bound over time, drawn with matplotlib
as inline SVG. Only ``plan`` and ``rebalance`` import it (lazily); ``serve`` never does.
"""
