"""`elmo-transformers push` off the happy path: one line."""

import json
import shutil

from conftest import one_line, run


def test_push_of_a_bogus_architecture_or_to_an_unwritable_staging_dir_is_one_line(tiny_model_dir, tmp_path, capsys):
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "architectures": ["Banana"]}))
    one_line(*run(["push", model, "me/x", "--dry-run"], capsys), "config.architectures names 'Banana'")
    (tmp_path / "a-file").write_text("")
    one_line(
        *run(["push", tiny_model_dir, "me/x", "--dry-run", "--staging-dir", tmp_path / "a-file" / "stage"], capsys),
        "error: --staging-dir ",
        ": cannot write into it: ",
    )
