"""Every float flag of kubeplace and of its benchmarks refuses nan and inf: click's FloatRange alone
lets nan through every bound (it compares false with each), so a time limit or a share of nan
reached the solver or the bench unchecked."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from kubeplace.cli.main import main
from kubeplace.cli.options import FiniteFloatRange

Found = tuple[tuple[str, ...], click.Option]


def _float_options(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[Found]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _float_options(sub, (*path, name))
    for param in command.params:
        if isinstance(param, click.Option) and isinstance(param.type, click.FloatRange):
            yield path, param


FLOAT_OPTIONS = list(_float_options(main))


def test_there_are_float_flags_to_check() -> None:
    assert len(FLOAT_OPTIONS) > 20 and any(path[:1] == ("bench",) for path, _ in FLOAT_OPTIONS)


@pytest.mark.parametrize(("path", "option"), FLOAT_OPTIONS, ids=[f"{' '.join(p)} {o.name}" for p, o in FLOAT_OPTIONS])
def test_every_float_flag_is_finite(path: tuple[str, ...], option: click.Option) -> None:
    assert isinstance(option.type, FiniteFloatRange), f"kubeplace {' '.join(path)} {option.opts[0]}"


def test_a_nan_time_limit_is_one_line_and_exit_2() -> None:
    result = CliRunner().invoke(main, ["bench", "fgd-protocol", "--nodes", "README.md", "--pods", "README.md",
                                       "--bound-time-limit", "nan"])
    assert result.exit_code == 2 and "is not a finite number" in result.output
