"""The tune's Optuna study: its storage, sampler and pruner, what it was created for, and the
trials that a dead or interrupted process left behind.

Storage is Optuna's RDB storage: SQLite under ``--out`` by default, or a PostgreSQL URL that
several processes or machines share. A heartbeat marks each running trial alive; a trial whose
process died is failed and enqueued again with its parameters (Optuna's retry callback), so the
copy resumes the same run directory. On one host a dead owner is seen at once (its pid); on
another, once its heartbeat is stale.
"""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dynrag.errors import ConfigError

if TYPE_CHECKING:
    import optuna

STUDY_DB = "study.db"
HEARTBEAT_S = 10  # a running trial writes its heartbeat this often
GRACE_S = 60  # ... and is failed (then retried) when its heartbeat is older than this
IDENTITY_ATTR = "dynrag_tune"  # the study's user attribute: what it was created for
Sampler = Literal["tpe", "grid", "random"]
Pruner = Literal["none", "median", "halving"]


def storage_url(given: str | None, out: Path) -> str:
    return given or f"sqlite:///{(Path(out) / STUDY_DB).resolve()}"


def shown_url(url: str) -> str:
    """The URL with any password hidden, for messages and files."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given; opening it says why
        return url


def open_storage(url: str) -> "optuna.storages.RDBStorage":
    """Optuna's RDB storage at ``url`` (sqlite:/// or postgresql://), connected now: an
    unreachable server or a bad URL is one line naming it."""
    import optuna
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    given, scheme = url, url.split(":", 1)[0]
    engine: dict[str, Any] = {}
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        url = "postgresql+psycopg:" + url.split(":", 1)[1]
        # Connections fail in seconds instead of waiting on a dead host; no idle pool is kept open.
        from sqlalchemy.pool import NullPool

        engine = {"connect_args": {"connect_timeout": 10}, "poolclass": NullPool}
    elif scheme != "sqlite":
        raise ConfigError(f"--storage {shown_url(given)}: expected sqlite:///FILE or postgresql://USER@HOST:PORT/DB")
    # dynrag says what a trial did; a failed trial's error reaches the user as one line, not Optuna's log
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    for attempt in (1, 2):  # two processes creating the tables at once: the loser finds them made
        try:
            return RDBStorage(url, engine_kwargs=engine, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
                              heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback())
        except Exception as exc:  # sqlalchemy's errors (driver, DNS, refused, auth) all land here
            from sqlalchemy.exc import IntegrityError, ProgrammingError

            if attempt == 1 and isinstance(exc, (IntegrityError, ProgrammingError)):
                continue
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            raise ConfigError(f"--storage {shown_url(given)}: cannot open the study storage "
                              f"({reason[0] if reason else type(exc).__name__})") from None
    raise AssertionError("unreachable")


def make_sampler(kind: Sampler, seed: int | None, grid: dict[str, list[Any]] | None) -> "optuna.samplers.BaseSampler":
    import optuna

    if kind == "grid":
        assert grid is not None
        return optuna.samplers.GridSampler(grid, seed=seed)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def make_pruner(kind: Pruner, every: int, startup: int) -> "optuna.pruners.BasePruner":
    import optuna

    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup, n_warmup_steps=0)
    if kind == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=every, reduction_factor=3)
    return optuna.pruners.NopPruner()


def open_study(storage: "optuna.storages.RDBStorage", name: str, identity: dict[str, Any], direction: str,
               sampler: "optuna.samplers.BaseSampler", pruner: "optuna.pruners.BasePruner", *,
               where: str | None = None, fresh: str = "--study") -> "optuna.Study":
    """The study ``name``, created with ``identity`` or checked against the identity it was created
    with: a study of another space, metric or run is refused, naming each setting that differs.
    ``where`` opens the message (default ``--study NAME``); ``fresh`` is the flag that picks
    another study."""
    import optuna

    study = optuna.create_study(storage=storage, study_name=name, direction=direction, sampler=sampler,
                                pruner=pruner, load_if_exists=True)
    recorded = study.user_attrs.get(IDENTITY_ATTR)
    if recorded is None:
        if study.trials:
            raise ConfigError(f"--study {name}: holds trials not made by `dynrag tune`; choose another --study")
        study.set_user_attr(IDENTITY_ATTR, identity)
        return study
    changes = identity_changes(recorded, identity)
    if changes:
        raise ConfigError(f"{where or f'--study {name}'}: this study was made with "
                          f"{', '.join(_setting(k, v) for k, v, _ in changes)}; now "
                          f"{', '.join(_setting(k, v) for k, _, v in changes)} "
                          f"(rerun with the study's settings or choose a new {fresh})")
    return study


def identity_changes(recorded: dict[str, Any], identity: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Each setting whose value differs between two study identities, as (name, old, new): the
    run's keys one by one (``limit``, ``options.theta``), since a whole run shown twice hides the
    one key that changed (pure)."""
    old, new = _settings(recorded), _settings(identity)
    return [(k, old.get(k), new.get(k)) for k in dict.fromkeys([*new, *old]) if old.get(k) != new.get(k)]


def _settings(identity: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, value in identity.items():
        if k == "run" and isinstance(value, dict):
            for run_key, v in value.items():
                if isinstance(v, dict):
                    flat.update({f"{run_key}.{option}": x for option, x in v.items()})
                else:
                    flat[run_key] = v
        elif k == "space":
            flat["--space"] = " --space ".join(map(str, value or []))
        elif k == "grid":
            # The grid follows from the space, so it tells only whether the sampler was grid (tpe and
            # random record none): naming the grid itself would repeat the space.
            flat["sampler"] = "grid" if value else "tpe or random"
        else:
            flat[k] = value
    return flat


def _setting(k: str, value: Any) -> str:
    if k == "--space":
        return f"--space {value}"
    text = "none" if value is None else str(value)
    return f"{k}={text if len(text) <= 60 else text[:57] + '...'}"


def owner_attr(number: int) -> dict[str, Any]:
    """Who runs trial ``number``: recorded on it (user attribute "owner") so a process on the same
    host can tell it died. A retried copy inherits its original's attributes: the trial number
    tells the copy's own owner from the original's."""
    return {"trial": number, "host": socket.gethostname(), "pid": os.getpid()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(study: "optuna.Study") -> list[int]:
    """Fail each running trial whose process is gone and enqueue it again (the same parameters,
    so its copy resumes the same run directory): those of this host whose pid is dead now, those
    of other hosts once their heartbeat is stale. The numbers of the trials recovered."""
    import optuna
    from optuna.trial import TrialState

    storage = study._storage  # the storage the study was opened on
    host, recovered = socket.gethostname(), []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = trial.user_attrs.get("owner") or {}
        if owner.get("trial") == trial.number and owner.get("host") == host and isinstance(owner.get("pid"), int) \
                and owner["pid"] != os.getpid() and not _alive(owner["pid"]):
            try:
                if storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                    retry(study, storage.get_trial(trial._trial_id))
                    recovered.append(trial.number)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # another process recovered it first
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
    optuna.storages.fail_stale_trials(study)  # other hosts' dead trials: failed and retried by the callback
    after = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
    return recovered + sorted(after - before)


def retry(study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> None:
    """Enqueue a failed trial again with its parameters (Optuna's retry callback)."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    RetryHeartbeatStaleTrialCallback()(study, trial)


def root_number(trial: "optuna.trial.FrozenTrial | optuna.Trial") -> int:
    """The number of the first trial of a retried series: whose run directory every copy uses."""
    attrs = trial.system_attrs
    return int(attrs["failed_trial"]) if "failed_trial" in attrs else trial.number
