"""The suite results a server shows: the baselines shipped with gpuarena, and every result an
operator puts in the server's suite folder (`<GPUARENA_HOME>/suite/*.json`, as
`gpuarena suite run -o` writes them). Files, not tables: a result is made on a GPU machine by
hand and copied in, as Datasette serves the databases it is given."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gpuarena.suite.model import SuiteResult

BASELINES = Path(__file__).resolve().parent / "baselines"
MAX_RESULT_BYTES = 20_000_000


def load_results(folder: Path | None) -> tuple[dict[str, SuiteResult], list[str]]:
    """name -> result (shipped ones as `shipped/NAME`), and why each unreadable file was left out."""
    found: dict[str, SuiteResult] = {}
    problems: list[str] = []
    sources = [("shipped/", BASELINES)] + ([("", folder)] if folder is not None and folder.is_dir() else [])
    for prefix, where in sources:
        for path in sorted(where.glob("*.json")):
            try:
                if path.stat().st_size > MAX_RESULT_BYTES:
                    raise ValueError(f"larger than {MAX_RESULT_BYTES} bytes")
                found[prefix + path.stem] = SuiteResult.model_validate_json(path.read_bytes())
            except (OSError, ValueError, ValidationError) as exc:
                problems.append(f"{path.name}: not a suite result ({str(exc).splitlines()[0][:200]})")
    return found, problems
