"""What the data-flow checker keeps of a sync: the phase it hands over to, or one line saying none does."""
import pytest

from npusim.errors import DataflowError
from npusim.record.records import PhaseRec, SyncRec


def test_a_sync_hands_over_to_the_phase_that_opens_after_it():
    p, q = PhaseRec("P", "vec"), PhaseRec("Q", "cube")
    sync = SyncRec(1, producer=p, payload=[])
    with pytest.raises(DataflowError, match="ends the program: no phase consumes it"):
        sync.into
    sync.consumer = q
    assert sync.into is q and not sync.next_item
