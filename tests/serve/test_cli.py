"""`dynrag serve`'s command line fails on bad settings before it loads anything."""

import subprocess
import sys


def serve(*args):
    return subprocess.run([sys.executable, "-m", "dynrag.cli", "serve", *args], capture_output=True, text=True,
                          timeout=120)


def test_a_bad_config_key_or_setting_is_named(tmp_path):
    bad = tmp_path / "run.yaml"
    bad.write_text("method: flare\noptions:\n  thetta: 0.3\n")
    r = serve("--config", str(bad))
    assert r.returncode == 1 and "thetta" in r.stderr and "theta" in r.stderr
    r = serve("--queue-size", "-1")
    assert r.returncode == 1 and "queue_size" in r.stderr
