//! How many bytes one task of a copy or sync spread over a cluster holds
//! when the caller does not say (issue #56).
//!
//! A fixed budget (1 GiB before) made a copy of 4 x 32 MiB, or of one
//! 96 MiB object, a single task on a cluster of any size. Here the budget
//! follows the plan and the cluster: the bytes to copy over the task slots
//! (worker threads), so every slot gets a share, but never below
//! [`FLOOR`], where a task's fixed cost (a scheduler round trip, the first
//! request on a new connection, a multipart upload's start and finish)
//! would be a large part of its time, and never above [`CEILING`], so a
//! failed task retries at most that much and progress stays visible.
//!
//! The total is known only once the listing ended, and each listing task
//! sees only its own range; so a listing cuts its range finer than any
//! budget can be ([`grain`]), reports the bytes and keys of each piece,
//! and the client joins neighbouring pieces up to the budget ([`join`]).

/// The smallest default task: at a worker's few hundred MB/s it is tens of
/// milliseconds of copying, several times a task's fixed cost.
pub(crate) const FLOOR: u64 = 16 << 20;

/// The largest default task (the fixed default before).
pub(crate) const CEILING: u64 = 1 << 30;

/// At most this many pieces by bytes per listed range below [`CEILING`]
/// a piece (keys cut more): the client holds each cut key until the
/// pieces are joined. A cluster of more task slots than this, with one
/// range holding most of the bytes, gets tasks of that range's
/// 64th rather than the total's share of each slot.
pub(crate) const MAX_GRAIN_PIECES: usize = 64;

/// The default part of a split copy (a multipart upload copied by several
/// tasks), when the caller does not say.
pub(crate) const PART_SIZE: u64 = 64 << 20;

/// Bytes one task holds: `total` over `slots`, within [`FLOOR`, `CEILING`].
pub fn task_bytes(total: u64, slots: usize) -> u64 {
    total.div_ceil(slots.max(1) as u64).clamp(FLOOR, CEILING)
}

/// The size of a split copy's parts when the caller does not say: small
/// enough that a task of `bytes_per_task` holds at least one whole part,
/// so an object a few tasks big is written by that many tasks (64 MiB
/// parts made a 96 MiB object two unequal parts at most).
pub fn part_size(bytes_per_task: u64) -> u64 {
    PART_SIZE.min(bytes_per_task.max(1))
}

/// The budget a listing task cuts its range of `range_bytes` with, before
/// the total is known: pieces no bigger than the smallest budget
/// [`task_bytes`] could choose for `slots` (up to [`MAX_GRAIN_PIECES`]
/// slots), none bigger than [`CEILING`].
pub fn grain(range_bytes: u64, slots: usize) -> u64 {
    range_bytes
        .div_ceil(slots.clamp(1, MAX_GRAIN_PIECES) as u64)
        .clamp(FLOOR, CEILING)
}

/// Which of consecutive pieces `(bytes, keys)` start a task when
/// neighbours are joined while a task stays within `max_bytes` and
/// `max_keys`: the indexes of the first piece of each task, in order
/// (`[0, …]`, empty for no pieces). A piece over a budget on its own is a
/// task alone.
pub fn join(pieces: &[(u64, u64)], max_bytes: u64, max_keys: u64) -> Vec<usize> {
    let mut starts = Vec::new();
    let (mut bytes, mut keys) = (0u64, 0u64);
    for (i, &(b, k)) in pieces.iter().enumerate() {
        let fits = !starts.is_empty()
            && bytes.saturating_add(b) <= max_bytes
            && keys.saturating_add(k) <= max_keys;
        if fits {
            bytes += b;
            keys += k;
        } else {
            starts.push(i);
            (bytes, keys) = (b, k);
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn budget_shares_the_plan_between_slots_within_floor_and_ceiling() {
        // 4 x 32 MiB on 2 workers of one thread: 64 MiB a task, both busy.
        assert_eq!(task_bytes(128 * MIB, 2), 64 * MIB);
        // 96 MiB on 2: two tasks of 48, each one part of 48 MiB.
        assert_eq!(task_bytes(96 * MIB, 2), 48 * MIB);
        assert_eq!(part_size(48 * MIB), 48 * MIB);
        assert_eq!(part_size(4 << 30), PART_SIZE);
        // Small plans stop at the floor, huge ones at the ceiling.
        assert_eq!(task_bytes(MIB, 8), FLOOR);
        assert_eq!(task_bytes(0, 0), FLOOR);
        assert_eq!(task_bytes(1 << 50, 4), CEILING);
    }

    #[test]
    fn grain_is_never_coarser_than_a_budget_of_the_same_range() {
        for (bytes, slots) in [
            (128 * MIB, 2),
            (10 << 30, 8),
            (1 << 40, 64),
            (MIB, 1),
            (1 << 40, 500),
        ] {
            let g = grain(bytes, slots);
            assert!((FLOOR..=CEILING).contains(&g));
            // The range alone is at most the total: a budget for this
            // cluster is at least what the range's share would be.
            assert!(g <= task_bytes(bytes, slots.min(MAX_GRAIN_PIECES)));
            let most = (MAX_GRAIN_PIECES as u64).max(bytes / CEILING);
            assert!(bytes.div_ceil(g) <= most);
        }
    }

    #[test]
    fn joins_neighbours_within_both_budgets() {
        let p = [(10, 1), (10, 1), (25, 1), (5, 1), (5, 1), (5, 1)];
        assert_eq!(join(&p, 20, 10), [0, 2, 3]);
        // Keys bound too: two keys a task.
        assert_eq!(join(&p, 100, 2), [0, 2, 4]);
        assert_eq!(join(&[], 1, 1), Vec::<usize>::new());
        // A piece bigger than the budget is alone.
        assert_eq!(join(&[(50, 1), (1, 1)], 20, 10), [0, 1]);
    }
}
