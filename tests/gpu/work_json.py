"""tests/gpu/work_json.py: the reading of the JSON files a script's runs left
in its work folder (run_json in bundle.sh), for the tables that
cpu_host_diag.sh, grid_rows.sh, host_rows.sh and pool_diag.sh print from a
heredoc run in the bundle's root (enter_bundle's working folder):
    sys.path.insert(0, "tests/gpu"); from work_json import json_loader"""
import json
import os


def json_loader(work):
    """load(NAME): WORK/NAME.json's object, {} when the run left none or
    wrote something that is not JSON (a failed run shows as '-' cells)."""
    def load(name):
        try:
            with open(os.path.join(work, name + ".json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}
    return load
