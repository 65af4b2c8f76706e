"""Invites through the API (issue 17): who may make which, joining with one, and a last use
taken by one of two people at once."""

from __future__ import annotations

import threading


def test_invites_through_the_api(api) -> None:
    admin, organiser, participant = api.user("root", "admin"), api.user("olga", "organiser"), api.user("pat")
    refused = api.http.post("/api/invites", json={}, headers=participant)
    assert refused.status_code == 403 and "organisers and admins" in refused.json()["error"]
    assert api.http.post("/api/invites", json={"role": "organiser"}, headers=organiser).status_code == 403
    made = api.http.post("/api/invites", json={"role": "organiser", "uses": 2, "note": "staff"}, headers=admin)
    assert made.status_code == 201 and made.json()["link"].endswith("/join/" + made.json()["code"])
    joined = api.http.post("/api/join", json={"code": made.json()["code"], "name": "otto"})
    assert joined.status_code == 201
    me = api.http.get("/api/me", headers={"Authorization": f"Bearer {joined.json()['token']}"}).json()
    assert (me["name"], me["role"]) == ("otto", "organiser")
    taken = api.http.post("/api/join", json={"code": made.json()["code"], "name": "Otto"})
    assert taken.status_code == 400 and "mistaken for the existing 'otto'" in taken.json()["error"]
    listed = api.http.get("/api/invites", headers=admin).json()
    assert listed[0]["uses_left"] == 1 and "code" not in listed[0]  # the code is never shown again
    assert api.http.get("/api/invites", headers=organiser).json() == []  # an organiser sees their own
    assert api.http.delete(f"/api/invites/{listed[0]['id']}", headers=organiser).status_code == 403
    assert api.http.delete(f"/api/invites/{listed[0]['id']}", headers=admin).json()["revoked_at"]
    gone = api.http.post("/api/join", json={"code": made.json()["code"], "name": "late"})
    assert gone.status_code == 400 and "withdrawn" in gone.json()["error"]
    bad = api.http.post("/api/invites", json={"uses": 0}, headers=admin)
    assert bad.status_code == 400 and "uses" in bad.json()["error"]


def test_the_last_use_of_an_invite_goes_to_one_person(api) -> None:
    code = api.http.post("/api/invites", json={"uses": 1}, headers=api.user("root", "admin")).json()["code"]
    codes: list[int] = []
    threads = [
        threading.Thread(
            target=lambda i=i: codes.append(
                api.http.post("/api/join", json={"code": code, "name": f"racer{i}"}).status_code
            )
        )
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [201, 400, 400, 400]
