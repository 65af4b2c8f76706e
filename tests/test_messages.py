"""The worker protocol, typed: one request model per worker operation, each served by one
handler, each answered by one reply model that the supervisor validates before reading it."""

from __future__ import annotations

import pickle
import typing

import pytest

from gpuarena.contracts import messages
from gpuarena.harness.inside.worker import HANDLERS


def test_every_request_but_exit_has_one_handler_and_every_handler_a_request():
    assert set(HANDLERS) == set(messages.REQUESTS) - {messages.Exit}
    ops = [request.op for request in messages.REQUESTS]
    assert len(ops) == len(set(ops))


@pytest.mark.parametrize("request_type", messages.REQUESTS, ids=lambda r: r.op)
def test_each_request_s_reply_model_answers_to_its_operation(request_type):
    """The reply class a request names can carry the request's op (a Done, say, lists it)."""
    op_field = request_type.reply.model_fields["op"]
    allowed = typing.get_args(op_field.annotation) or (op_field.default,)
    assert request_type.op in allowed


def test_requests_travel_pickled_with_their_fields():
    sent = messages.Time(n=5, evict=False).model_copy(update={"nonce": "ab12"})
    got = pickle.loads(pickle.dumps(sent))
    assert isinstance(got, messages.Time) and (got.n, got.evict, got.nonce) == (5, False, "ab12")


def test_a_reply_is_read_as_its_request_s_model():
    reply = messages.read_reply(
        {"op": "time", "nonce": "x", "device_ns": [3, 4], "e2e_ns": [5, 6], "method": "cpu-perf-counter"},
        messages.Time(n=2),
    )
    assert isinstance(reply, messages.Timed) and reply.e2e_ns == [5, 6]
    failure = messages.read_reply({"op": "failure", "status": "RUNTIME_ERROR", "reason": "boom"}, messages.Time(n=2))
    assert isinstance(failure, messages.Failure) and failure.reason == "boom"


@pytest.mark.parametrize(
    "raw",
    [
        {"op": "call"},  # another operation's reply
        {"op": "garbage"},
        {"op": "time", "device_ns": [1.5]},  # not an integer
        {"op": "time", "device_ns": [True]},  # a bool is no count of nanoseconds
        {"op": "time", "device_ns": "1,2"},
        {"op": "time", "method": 7},
        {"op": "failure"},  # no status
        {"op": "failure", "status": "RUNTIME_ERROR", "traceback": ["a"]},
    ],
)
def test_a_reply_of_the_wrong_shape_is_not_a_harness_message(raw):
    with pytest.raises(messages.NotAReply):
        messages.read_reply(raw, messages.Time(n=1))


def test_fields_a_reply_does_not_define_are_dropped_unread():
    """A solution that adds `method` to its build reply decides nothing: the model has no such
    field, and the supervisor reads only the model."""
    built = messages.read_reply(
        {"op": "build", "method": "cuda-sync-wallclock", "rights": "none"},
        messages.Build(solution={}, setup=messages.RunSetup()),
    )
    assert isinstance(built, messages.Built) and "method" not in built.model_dump() and built.rights == "none"


def test_requests_refuse_fields_of_their_own_kind_s_making():
    """The supervisor's side is typed too: a request with an unknown field is a bug, caught here."""
    with pytest.raises(ValueError):
        messages.Time(n=1, check=[0])  # type: ignore[call-arg]
