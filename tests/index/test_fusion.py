"""Rank fusion and score shaping, pure."""

from __future__ import annotations

import pytest

from engramdb.core.errors import InvalidValueError
from engramdb.index.fusion import Fused, fuse, min_max, recency, rerank, rrf, weighted
from engramdb.index.search_config import SearchConfig


def test_rrf_rewards_agreement_and_scales_to_one() -> None:
    fused = rrf({"bm25": [1, 2, 3], "vector": [1, 3, 2]}, {"bm25": 1.0, "vector": 1.0}, k=60)
    assert fused[1] == pytest.approx(1.0)
    assert fused[1] > fused[2] == fused[3]
    assert max(fused.values()) <= 1.0
    one_sided = rrf({"bm25": [7], "vector": [8]}, {"bm25": 1.0, "vector": 1.0}, k=60)
    assert one_sided[7] == pytest.approx(0.5)
    assert rrf({"bm25": [1]}, {"bm25": 0.0}, k=60) == {}


def test_rrf_weights_tilt_the_order() -> None:
    fused = rrf({"bm25": [1, 2], "vector": [2, 1]}, {"bm25": 2.0, "vector": 1.0}, k=1)
    assert fused[1] > fused[2]


def test_min_max_and_weighted() -> None:
    assert min_max({1: 2.0, 2: 4.0, 3: 3.0}) == {1: 0.0, 2: 1.0, 3: 0.5}
    assert min_max({1: 5.0}) == {1: 1.0}
    assert min_max({}) == {}
    fused = weighted(
        {"bm25": {1: 10.0, 2: 0.0}, "vector": {2: 0.9, 3: -0.1}},
        {"bm25": 1.0, "vector": 3.0},
        saturation=10.0,
    )
    assert fused == pytest.approx({1: 0.125, 2: 0.675, 3: 0.0})


def test_recency_halves_every_half_life() -> None:
    assert recency(0, 30) == 1.0
    assert recency(30, 30) == pytest.approx(0.5)
    assert recency(-5, 30) == 1.0
    assert recency(10, 0) == 0.0


def test_fuse_keeps_scores_in_range_and_reports_parts() -> None:
    config = SearchConfig(recency_weight=0.2, importance_weight=0.1, time_boost=0.1)
    fused = fuse(
        {"bm25": {1: 9.0, 2: 3.0}, "vector": {2: 0.8, 3: 0.4}},
        config,
        ages_days={1: 100.0, 2: 0.0, 3: 1.0},
        importance={1: 1.0, 2: 0.5, 3: 0.0},
        in_range={1: False, 2: True, 3: False},
    )
    assert fused[0].id == 2
    assert all(0.0 <= f.score <= 1.0 for f in fused)
    top = fused[0].breakdown
    assert set(top) == {"fused", "bm25", "vector", "recency", "importance", "time"}
    assert top["time"] == 1.0
    assert top["bm25"] == 3.0


def test_fuse_orders_ties_by_id_and_supports_weighted() -> None:
    fused = fuse({"bm25": {5: 20.0, 4: 20.0}}, SearchConfig(fusion="weighted", time_boost=0.0))
    assert [f.id for f in fused] == [4, 5]
    assert [f.score for f in fused] == [0.5, 0.5]


def test_search_config_rejects_nonsense() -> None:
    with pytest.raises(InvalidValueError, match="mode"):
        SearchConfig(mode="magic")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="fusion"):
        SearchConfig(fusion="vibes")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="positive"):
        SearchConfig(candidates=0)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("save_graphs", "no"),  # a non-empty string would count as on
        ("save_graphs", None),
        ("save_graphs", 1),
        ("strip_time", "false"),
        ("candidates", 10**5000),
        ("candidates", True),
        ("candidates", 1.5),
        ("bm25_weight", float("nan")),
        ("vector_weight", float("inf")),
        ("rerank_weight", "0.5"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_search_config_refuses_a_setting_of_the_wrong_kind(setting: str, value: object) -> None:
    with pytest.raises(InvalidValueError, match=setting) as refused:
        SearchConfig(**{setting: value})  # type: ignore[arg-type]
    assert refused.value.details["field"] == setting


def test_group_boost_lifts_hits_from_strong_sessions() -> None:
    from engramdb.index.fusion import Fused, group_boost

    fused = [Fused(1, 0.9), Fused(2, 0.5), Fused(3, 0.6), Fused(4, 0.55)]
    groups = {1: "s1", 2: "s1", 3: "s2", 4: ""}
    lifted = group_boost(fused, groups, 0.5)
    assert [f.id for f in lifted] == [1, 2, 3, 4]
    assert lifted[1].score == pytest.approx(0.7)
    assert lifted[1].breakdown["session"] == 0.9
    assert lifted[3].score == pytest.approx(0.55)
    assert group_boost(fused, groups, 0.0) == fused


def test_bm25_that_cannot_discriminate_still_counts_as_a_match() -> None:
    from engramdb.index.fusion import absolute

    assert absolute("bm25", {1: 2e-6, 2: 1e-6}, 20.0) == {1: 0.5, 2: 0.5}
    assert absolute("bm25", {1: 20.0}, 20.0) == {1: 0.5}
    assert absolute("bm25", {}, 20.0) == {}


def test_rerank_puts_the_judged_first_by_blend_and_keeps_scores_falling() -> None:
    fused = [
        Fused(1, 0.9, {"fused": 0.9}),
        Fused(2, 0.8, {"fused": 0.8}),
        Fused(3, 0.7, {"fused": 0.7}),
        Fused(4, 0.6, {"fused": 0.6}),
    ]
    out = rerank(fused, {1: 0.0, 2: 1.0, 3: 1.5}, weight=0.5)
    assert [f.id for f in out] == [2, 3, 1, 4]
    assert [f.score for f in out] == pytest.approx([0.9, 0.85, 0.45, 0.45])
    assert [f.breakdown.get("rerank") for f in out] == [1.0, 1.0, 0.0, None]  # clamped to [0, 1]
    assert out[0].breakdown["fused"] == 0.8
    # Weight 0 keeps the hybrid order; weight 1 is the reranker's alone.
    assert [f.id for f in rerank(fused, {1: 0.0, 2: 1.0}, weight=0.0)] == [1, 2, 3, 4]
    assert [f.id for f in rerank(fused, {1: 0.2, 2: 0.1}, weight=1.0)] == [1, 2, 3, 4]
    assert [f.id for f in rerank(fused, {1: 0.1, 2: 0.2}, weight=1.0)] == [2, 1, 3, 4]
    assert rerank(fused, {}, weight=0.5) == fused
