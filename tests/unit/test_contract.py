"""Rank planning: where each rank sits and what it is told, for every backend the same."""
from mltrain.ranks import contract

from .jobs import frozen_job


def test_ranks_fill_nodes_in_order_with_the_full_contract():
    job = frozen_job("slurm", nodes=2, per_node=2)
    specs = contract.plan(job, "node1", 29500)
    assert [(s["place"].rank, s["place"].local_rank, s["place"].node_rank) for s in specs] == \
        [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)]
    env = specs[3]["env"]
    assert env["RANK"] == "3" and env["WORLD_SIZE"] == "4" and env["LOCAL_RANK"] == "1"
    assert env["LOCAL_WORLD_SIZE"] == "2" and env["NODE_RANK"] == env["GROUP_RANK"] == "1"
    assert env["MASTER_ADDR"] == "node1" and env["MASTER_PORT"] == "29500"
    assert env["AZ_BATCHAI_PYTORCH_INIT_METHOD"] == "tcp://node1:29500"
    assert env["AZ_BATCHAI_TASK_INDEX"] == "3" and env["AZ_BATCH_MASTER_NODE"] == "node1:29500"
    assert env["MLTRAIN_RUN_DIR"] == "/runs/r1" and env["MLTRAIN_OUTPUTS_DIR"] == "/runs/r1/outputs"
    assert env["MLTRAIN_BACKEND"] == "gloo" and env["AML_PARAMETER_lr"] == "0.1"


def test_arguments_are_expanded_per_rank_and_unknown_names_kept():
    specs = contract.plan(frozen_job(), "127.0.0.1", 1234)
    assert specs[1]["argv"] == ["/usr/bin/python3", "train.py", "--rank", "1", "--url", "tcp://127.0.0.1:1234",
                                "$NOT_A_VAR"]


def test_cores_are_shared_between_a_nodes_ranks_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert contract.plan(frozen_job(per_node=2), "h", 1, cpus=8)[0]["env"]["OMP_NUM_THREADS"] == "4"
    assert contract.plan(frozen_job(per_node=1), "h", 1, cpus=8)[0]["env"]["OMP_NUM_THREADS"] == "8"
    mine = frozen_job(env={"OMP_NUM_THREADS": "3"})
    assert contract.plan(mine, "h", 1, cpus=8)[0]["env"]["OMP_NUM_THREADS"] == "3"


def test_place_is_read_from_whichever_launcher_started_the_rank():
    assert contract.place_from_environment({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                                            "OMPI_COMM_WORLD_NODE_RANK": "1"}, 2) == contract.RankPlace(3, 1, 1)
    assert contract.place_from_environment({"SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1"}, 2) \
        == contract.RankPlace(2, 0, 1)
    assert contract.place_from_environment({"PMIX_RANK": "3"}, 2) == contract.RankPlace(3, 1, 1)
