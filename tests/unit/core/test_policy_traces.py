"""Every policy chooses the very shares it chose before it worked on arrays (`policy_traces`)."""

import json

from policy_traces import RECORDED, digests


def test_every_policy_chooses_the_recorded_shares_on_every_run():
    recorded = json.loads(RECORDED.read_text())
    now = digests()
    assert len(now) == len(recorded)
    changed = [name for (name, value), old in zip(now, recorded, strict=True) if value != old]
    assert not changed, f"{len(changed)} of {len(now)} runs chose other shares, e.g. {changed[:3]}"
