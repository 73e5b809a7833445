import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Task-model tests train small models; one thread keeps them deterministic and light on shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
