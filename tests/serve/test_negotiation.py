"""Content negotiation as RFC 9110 states it: the most specific range that names a type rates it."""

import pytest

from elmo.serve.errors import ApiError
from elmo.serve.service import negotiate

OFFERED = ("application/json", "application/x-npy", "application/octet-stream")


@pytest.mark.parametrize(("accept", "chosen"), [
    (None, "application/json"),
    ("*/*", "application/json"),
    ("application/x-npy", "application/x-npy"),
    ("application/json;q=0.5, application/x-npy", "application/x-npy"),
    ("application/json;q=0, */*", "application/x-npy"),  # JSON excluded, though */* would name it
    ("application/json;q=0.1, */*", "application/x-npy"),  # */* rates the others 1
    ("application/*;q=0.2, application/octet-stream", "application/octet-stream"),
    ("text/html, application/*;q=0.3", "application/json"),
    ("Application/JSON", "application/json"),
])
def test_the_most_specific_range_rates_each_type(accept, chosen):
    assert negotiate(accept, OFFERED) == chosen


@pytest.mark.parametrize("accept", ["text/html", "application/*;q=0", "*/*;q=0", "application/json;q=0"])
def test_a_header_that_rates_every_offered_type_0_is_answered_406(accept):
    with pytest.raises(ApiError) as refused:
        negotiate(accept, ("application/json",))
    assert refused.value.status == 406
