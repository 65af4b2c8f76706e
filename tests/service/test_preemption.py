"""Runner fairness (issue 46, item 10), on the real queue (SQLite and PostgreSQL): a free slot
goes to the user running fewest jobs, and a job whose user holds more than their share while
another user's job has waited too long is pre-empted at its runner's heartbeat: queued again
behind the waiting job, not counted as an attempt, its old lease refused, nothing lost or run twice."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select, update

from gpuarena.contracts.records import Evaluation, Status
from gpuarena.service import queue
from gpuarena.service.auth import add_user
from gpuarena.service.tables import Job, Problem, Result, Runner, SolutionBlob, Submission, utcnow

AFTER_S = 60.0


class Scene:
    """Users, one runner account with runners, and helpers over the real queue."""

    def __init__(self, db, slots: tuple[int, ...], users: tuple[str, ...] = ("ann", "bob", "cat")):
        """slots: each runner's cpu slots (the share is counted over the slots online)."""
        self.db = db
        with db.write() as session:
            self.users = {name: add_user(session, name).id for name in users}
            account = add_user(session, "runners", "runner")
            runners = [
                Runner(
                    user_id=account.id,
                    name=f"r{i}",
                    device_kinds=["cpu"],
                    devices=[{"device": "cpu", "kind": "cpu", "healthy": True}] * n,
                )
                for i, n in enumerate(slots)
            ]
            session.add_all(runners)
            session.add(SolutionBlob(hash="a" * 64, name="s", language="pytorch", manifest={}, sources={}, size=0))
            session.flush()
            self.runners = [r.id for r in runners]
            self.problem = session.scalar(select(Problem.id))

    def submit(self, user: str) -> int:
        """Queue a ranked job for user; returns the job's id."""
        with self.db.write() as session:
            s = Submission(
                user_id=self.users[user],
                problem_id=self.problem,
                solution_hash="a" * 64,
                device_kind="cpu",
                mode="ranked",
            )
            session.add(s)
            session.flush()
            return queue.enqueue(session, s).id

    def claim(self, runner: int = 0) -> Job:
        got = queue.claim(self.db, self.runners[runner], ["cpu"])
        assert got is not None
        return got.job

    def age(self, job_id: int, seconds: float = 2 * AFTER_S) -> None:
        """Move time back for one job: queued (and, if running, claimed) `seconds` ago."""
        then = utcnow() - dt.timedelta(seconds=seconds)
        with self.db.write() as session:
            job = session.get(Job, job_id)
            job.queued_at = then
            if job.claimed_at is not None:
                job.claimed_at = then

    def job(self, job_id: int) -> Job:
        with self.db.read() as session:
            return session.get(Job, job_id)

    def status(self, job_id: int) -> str:
        with self.db.read() as session:
            return session.scalar(select(Submission.status).join(Job).where(Job.id == job_id))

    def finish(self, job: Job, runner: int = 0) -> None:
        record = Evaluation(
            status=Status.PASSED, problem="p", solution_hash="a" * 64, device="cpu", mode="ranked", score=1.0
        )
        queue.complete(self.db, self.runners[runner], job.id, job.lease_token, record)


def test_a_job_beyond_its_users_share_is_preempted_for_a_job_that_waited_too_long(db) -> None:
    """One slot: ann's job (an uncancelled infinite loop) holds it while bob's waits."""
    s = Scene(db, slots=(1, 0))
    loop = s.submit("ann")
    held = s.claim()
    assert held.id == loop and held.attempts == 1
    waiting = s.submit("bob")
    assert queue.preempt(db, s.runners[0], AFTER_S) == []  # bob has not waited long yet
    s.age(loop)
    assert queue.preempt(db, s.runners[0], AFTER_S) == []  # ann's job ran long, but bob has not waited
    s.age(waiting)
    assert queue.preempt(db, s.runners[0], 0) == []  # pre-emption off
    assert queue.preempt(db, s.runners[1], AFTER_S) == []  # asked by another runner: not its job
    assert queue.preempt(db, s.runners[0], AFTER_S) == [loop]

    again = s.job(loop)
    assert (again.state, again.lease_token, again.attempts, again.preemptions) == ("queued", None, 0, 1)
    assert "pre-empted after" in again.last_error and "ann held more than their share" in again.last_error
    assert again.seed != held.seed  # the next run draws new inputs
    assert s.status(loop) == "QUEUED"
    assert queue.preempt(db, s.runners[0], AFTER_S) == []  # nothing runs: nothing more to stop
    # the runner that ran it is told at its heartbeat, and whatever it posts is refused
    assert queue.heartbeat(db, s.runners[0], {loop: held.lease_token}) == [loop]
    with pytest.raises(queue.LeaseLost):
        s.finish(held)

    nxt = s.claim()
    assert nxt.id == waiting  # the job that waited goes first; the pre-empted one is next
    with db.read() as session:
        assert queue.queue_position(session, session.get(Job, loop)) == 1
    s.finish(nxt)
    rerun = s.claim()
    assert rerun.id == loop and rerun.attempts == 1  # a pre-emption was no attempt
    s.finish(rerun)
    with db.read() as session:
        assert sorted(session.scalars(select(Result.job_id))) == sorted([loop, waiting])  # each once
        assert set(session.scalars(select(Submission.status))) == {"PASSED"}


def test_a_pre_empted_job_waits_for_a_free_slot_and_does_not_take_back_its_own(db) -> None:
    """On a 2-core VM a test-mode job took longer than the end-to-end test's 3 s turn: ann's loop,
    pre-empted for bob's job, pre-empted it back once it had waited 3 s, twice each, and then
    held the slot for good (max_preemptions), so bob's job never finished."""
    s = Scene(db, slots=(1,))
    loop = s.submit("ann")
    s.claim()
    waiting = s.submit("bob")
    s.age(loop), s.age(waiting)
    assert queue.preempt(db, s.runners[0], AFTER_S) == [loop]
    assert s.claim().id == waiting
    s.age(waiting), s.age(loop)  # bob's job has run long; ann's pre-empted loop has waited long
    assert queue.preempt(db, s.runners[0], AFTER_S) == []  # bob's job runs on to its end
    fresh = s.submit("cat")  # a job that has not had its turn is owed one
    s.age(fresh)
    assert queue.preempt(db, s.runners[0], AFTER_S) == [waiting]


def test_no_preemption_within_the_share_or_for_ones_own_jobs(db) -> None:
    s = Scene(db, slots=(1, 1))
    # two slots, ann and bob one each: cat has nothing queued, so each holds exactly their share
    ann, bob = s.submit("ann"), s.submit("bob")
    s.claim(0), s.claim(1)
    s.age(ann), s.age(bob)
    ann_second = s.submit("ann")  # ann's own job waiting behind her running one
    s.age(ann_second)
    assert queue.preempt(db, s.runners[0], AFTER_S) == queue.preempt(db, s.runners[1], AFTER_S) == []

    # cat waits too long: with 3 users on 2 slots, each share is 2/3: one running job makes room
    # (the most recently started), and only one: ann, just served, is owed nothing yet
    cat = s.submit("cat")
    s.age(cat)
    s.age(bob, 3 * AFTER_S)
    stopped = queue.preempt(db, s.runners[0], AFTER_S) + queue.preempt(db, s.runners[1], AFTER_S)
    assert stopped == [ann]  # one waiting job: one slot freed, not two
    assert s.claim(0).id == cat  # cat first; ann has been served just now


def test_a_job_is_preempted_at_most_max_preemptions_times(db) -> None:
    s = Scene(db, slots=(1,))
    loop = s.submit("ann")
    s.claim()
    waiting = s.submit("bob")
    s.age(loop), s.age(waiting)
    with db.write() as session:
        session.execute(update(Job).where(Job.id == loop).values(preemptions=2))
    assert queue.preempt(db, s.runners[0], AFTER_S, max_preemptions=2) == []  # it runs on to its end
    assert queue.preempt(db, s.runners[0], AFTER_S, max_preemptions=3) == [loop]


def test_a_free_slot_goes_to_the_user_running_fewest(db) -> None:
    """ann runs two jobs and queued three more before bob queued one: bob's goes first."""
    s = Scene(db, slots=(1, 1, 1))
    ann = [s.submit("ann") for _ in range(5)]
    s.claim(0), s.claim(1)
    bob = s.submit("bob")
    assert s.claim(2).id == bob
    # and a pre-empted job goes behind its user's other queued jobs
    s.age(ann[0]), s.age(ann[1])
    cat = s.submit("cat")
    s.age(cat)
    stopped = queue.preempt(db, s.runners[0], AFTER_S) + queue.preempt(db, s.runners[1], AFTER_S)
    assert len(stopped) == 1
    assert s.claim(0).id == cat
    with db.read() as session:
        order = session.scalars(select(Job.id).where(Job.state == "queued").order_by(Job.queued_at, Job.id)).all()
        assert order[-1] == stopped[0]
    assert s.claim(1).id not in stopped
