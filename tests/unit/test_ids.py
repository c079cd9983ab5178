"""Prefixed ULIDs (relaynet.ids, PROTOCOL.md 2): sortable by creation, and a sibling id names one
object's copy from the other's id (a channel envelope's mailbox copies)."""

from __future__ import annotations

import pytest

from relaynet import ids


def test_ids_made_in_one_process_strictly_increase_within_a_millisecond():
    made = [ids.new_id("env") for _ in range(2000)]
    assert made == sorted(made) and len(set(made)) == len(made)


def test_a_sibling_keeps_the_ulid_and_so_the_order():
    envs = [ids.new_id("env") for _ in range(50)]
    msgs = [ids.sibling("msg", e) for e in envs]
    assert all(m.startswith("msg_") and m[4:] == e[4:] for m, e in zip(msgs, envs))
    assert msgs == sorted(msgs)


@pytest.mark.parametrize("of", ["", "env", "env_", "env_short", "nope_01JD0000000000000000000000", "01JD0000"])
def test_a_sibling_of_something_that_is_not_a_prefixed_id_is_a_value_error(of):
    with pytest.raises(ValueError, match="not a prefixed id"):
        ids.sibling("msg", of)


def test_a_sibling_with_an_unknown_prefix_is_a_value_error():
    with pytest.raises(ValueError, match="unknown id prefix"):
        ids.sibling("mail", ids.new_id("env"))
