"""Which files a snapshot takes: Azure's .amlignore/.gitignore rules, and never mltrain's own state."""
from mltrain.launch.snapshot import select_files


def _tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_amlignore_wins_over_gitignore_and_outputs_logs_are_never_taken(tmp_path):
    _tree(tmp_path, {".amlignore": "data/\n*.ckpt\n!keep.ckpt\n", ".gitignore": "train.py\n", "train.py": "",
                     "data/big.bin": "", "a.ckpt": "", "keep.ckpt": "", "outputs/x": "", "logs/y": "",
                     "sub/outputs/z": "", ".git/HEAD": ""})
    files, used = select_files(tmp_path)
    assert files == [".amlignore", ".gitignore", "keep.ckpt", "sub/outputs/z", "train.py"]
    assert used == [".amlignore"]


def test_gitignore_applies_when_there_is_no_amlignore_and_nested_rules_apply_below(tmp_path):
    _tree(tmp_path, {".gitignore": "*.pyc\n", "a.py": "", "a.pyc": "", "pkg/.gitignore": "gen/\n",
                     "pkg/gen/x.py": "", "pkg/b.py": "", "gen/kept.py": ""})
    files, used = select_files(tmp_path)
    assert files == [".gitignore", "a.py", "gen/kept.py", "pkg/.gitignore", "pkg/b.py"]
    assert used == [".gitignore", "pkg/.gitignore"]


def test_the_run_root_inside_the_source_folder_is_left_out(tmp_path):
    _tree(tmp_path, {"train.py": "", "runs/old_run/snapshot/train.py": "", "home/envs/x": ""})
    files, _ = select_files(tmp_path, exclude=[str(tmp_path / "runs"), str(tmp_path / "home")])
    assert files == ["train.py"]
