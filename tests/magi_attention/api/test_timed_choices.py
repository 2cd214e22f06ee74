"""api._timed_choices.GroupChoices: the per-process store of timed choices. Its eviction must
depend on the order of the keys alone (every rank of a group builds them in one order), and
groups must not share or evict each other's choices."""
import pytest

from magi_attention.api._timed_choices import GroupChoices


def test_a_kept_choice_is_not_timed_again_and_the_oldest_goes_first():
    store, timed = GroupChoices(max_per_group=2), []

    def get(key):
        return store.get_or_time(None, key, lambda: timed.append(key) or f"choice {key}")
    assert [get(k) for k in ("a", "b", "a")] == ["choice a", "choice b", "choice a"]
    assert timed == ["a", "b"]
    get("c")  # evicts a, the oldest, though it was read last
    get("b")
    get("a")
    assert timed == ["a", "b", "c", "a"]


def test_groups_keep_their_own_choices(monkeypatch):
    import magi_attention.api._timed_choices as tc
    monkeypatch.setattr(tc, "group_ranks", lambda group: group)
    store = GroupChoices(max_per_group=1)
    assert store.get_or_time((0, 1), "k", lambda: 1) == 1
    assert store.get_or_time((2, 3), "k", lambda: 2) == 2
    assert store.get_or_time((0, 1), "k", lambda: 3) == 1  # not evicted by the other group


def test_max_per_group_must_be_positive():
    with pytest.raises(ValueError, match="max_per_group"):
        GroupChoices(0)
