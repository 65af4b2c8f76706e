"""chaos.py's verdict, read from the database at the end: lost and duplicated jobs, and the
leaderboards compared with the Evaluation records and with both API servers' answers.

Split from chaos.py so that the counting is read apart from the killing.
"""

from __future__ import annotations

import statistics


def verify(url: str, users: list[str], keys_expected: int, servers: list[str]) -> dict:
    """Count lost and duplicated jobs and compare the leaderboards with the evaluation rows."""
    import httpx
    from sqlalchemy import create_engine, func, select

    from gpuarena.service.db import normalise_url
    from gpuarena.service.tables import Job, LeaderboardEntry, Problem, Result, Submission, User

    engine = create_engine(normalise_url(url))
    from sqlalchemy.orm import Session

    with Session(engine) as session:
        subs = list(
            session.execute(
                select(
                    Submission.id,
                    Submission.client_key,
                    Submission.status,
                    Submission.mode,
                    Submission.user_id,
                    Submission.problem_id,
                    Submission.device_kind,
                    Submission.created_at,
                    Submission.finished_at,
                )
                .join(User, User.id == Submission.user_id)
                .where(User.name.in_(users))
            )
        )
        keys = {s.client_key for s in subs}
        results = list(
            session.execute(
                select(
                    Result.job_id,
                    Result.submission_id,
                    Result.status,
                    Result.score,
                    Result.evaluation,
                    Result.runner_id,
                )
            )
        )
        per_job: dict[int, int] = {}
        per_sub: dict[int, list] = {}
        for r in results:
            per_job[r.job_id] = per_job.get(r.job_id, 0) + 1
            per_sub.setdefault(r.submission_id, []).append(r)
        jobs = {j.submission_id: j for j in session.scalars(select(Job))}
        no_result = [s.id for s in subs if len(per_sub.get(s.id, [])) == 0]
        status_mismatch = [s.id for s in subs if per_sub.get(s.id) and per_sub[s.id][0].status != s.status]
        duplicated_results = sum(n - 1 for n in per_job.values() if n > 1)
        duplicated_submissions = len(subs) - len(keys)
        missing_keys = keys_expected - len(keys)
        # leaderboards, recomputed from the Evaluation records
        names = dict(session.execute(select(User.id, User.name)).all())
        mode_of = {s.id: s for s in subs}
        best: dict[tuple[int, str], dict[str, float]] = {}
        for r in results:
            s = mode_of.get(r.submission_id)
            if (
                s is None
                or s.mode != "ranked"
                or r.evaluation.get("status") != "PASSED"
                or r.evaluation.get("score") is None
            ):
                continue
            board = best.setdefault((s.problem_id, s.device_kind), {})
            user = names[s.user_id]
            board[user] = max(board.get(user, float("-inf")), float(r.evaluation["score"]))
        stored: dict[tuple[int, str], dict[str, float]] = {}
        for e in session.scalars(select(LeaderboardEntry)):
            stored.setdefault((e.problem_id, e.device_kind), {})[names[e.user_id]] = e.score
            result_scores = [x.score for x in per_sub.get(e.submission_id, [])]
            if result_scores != [e.score]:
                stored[(e.problem_id, e.device_kind)]["!" + names[e.user_id]] = -1.0  # entry not backed by its result
        mismatches = [
            f"{k}: stored {stored.get(k)} recomputed {best.get(k)}"
            for k in set(best) | set(stored)
            if stored.get(k) != best.get(k)
        ]
        slugs = dict(session.execute(select(Problem.id, Problem.slug)).all())
        for (problem_id, kind), board in best.items():
            answers = []
            for server in servers:
                reply = httpx.get(
                    server + "/api/leaderboard", params={"problem": slugs[problem_id], "device_kind": kind}, timeout=30
                ).json()
                answers.append({row["user"]: row["score"] for row in reply["rows"]})
            if any(answer != board for answer in answers):
                mismatches.append(f"API {slugs[problem_id]}/{kind}: {answers} vs {board}")
        attempts: dict[int, int] = {}
        for s in subs:
            job = jobs.get(s.id)
            if job is not None:
                attempts[job.attempts] = attempts.get(job.attempts, 0) + 1
        latencies = sorted((s.finished_at - s.created_at).total_seconds() for s in subs if s.finished_at)
        by_runner: dict[str, int] = {}
        from gpuarena.service.tables import Runner

        runner_names = dict(session.execute(select(Runner.id, Runner.name)).all())
        for r in results:
            by_runner[runner_names.get(r.runner_id, "?")] = by_runner.get(runner_names.get(r.runner_id, "?"), 0) + 1
        statuses: dict[str, int] = {}
        for s in subs:
            statuses[s.status] = statuses.get(s.status, 0) + 1
        total_results = session.scalar(select(func.count()).select_from(Result))
    engine.dispose()
    return {
        "submissions": len(subs),
        "results": total_results,
        "lost": len(no_result) + missing_keys,
        "lost_submission_ids": no_result[:50],
        "missing_submissions": missing_keys,
        "duplicated": duplicated_results + duplicated_submissions,
        "duplicated_results": duplicated_results,
        "duplicated_submissions": duplicated_submissions,
        "status_mismatches": len(status_mismatch),
        "leaderboards": len(best),
        "leaderboard_mismatches": mismatches,
        "statuses": statuses,
        "attempts": {str(k): v for k, v in sorted(attempts.items())},
        "results_by_runner": by_runner,
        "latency_s": {
            "p50": round(statistics.median(latencies), 2) if latencies else None,
            "p95": round(latencies[int(0.95 * (len(latencies) - 1))], 2) if latencies else None,
            "max": round(latencies[-1], 2) if latencies else None,
        },
    }
