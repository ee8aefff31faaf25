"""Retry decisions and backoff: only retryable aborts are run again, with randomized waits that
grow exponentially up to a cap."""

import random
import unittest

import grpc

import support  # noqa: F401 - the package from this source tree

from augur_client import Aborted, Backoff, is_retryable, retrying
from augur_client._errors import NEVER_RETRIED, request_error


def aborted(reason, retryable=True):
    return Aborted(reason, f"described {reason}", retryable)


class Decisions(unittest.TestCase):
    def test_retryable_aborts_are_retried(self):
        for reason in ("write_write_conflict", "wait_die", "validation_failed", "lock_timeout",
                       "cascading_abort", "timeout", "snapshot_too_old", "transaction_lost"):
            with self.subTest(reason=reason):
                self.assertTrue(is_retryable(aborted(reason)))

    def test_the_node_can_say_no(self):
        self.assertFalse(is_retryable(aborted("write_write_conflict", retryable=False)))

    def test_rollbacks_misspeculations_and_invalid_requests_never_are(self):
        # Even when a node calls them retryable (the Rust client's AbortReason::is_retryable
        # calls invalid_request retryable), running them again cannot help.
        self.assertEqual(NEVER_RETRIED, {"user_rollback", "misspeculation", "invalid_request"})
        for reason in NEVER_RETRIED:
            with self.subTest(reason=reason):
                self.assertFalse(aborted(reason, retryable=True).retryable)
                self.assertFalse(is_retryable(aborted(reason, retryable=True)))

    def test_failed_requests_and_other_errors_are_not_retried(self):
        unknown = request_error(
            grpc.StatusCode.UNAVAILABLE, "no reply", node="n", operation="commit",
            outcome_unknown=True,
        )
        self.assertFalse(is_retryable(unknown))
        self.assertFalse(is_retryable(ValueError("x")))


class BackoffWaits(unittest.TestCase):
    def test_bounds_double_up_to_the_cap(self):
        b = Backoff(base=0.01, cap=0.05)
        self.assertEqual([b.bound(n) for n in range(1, 6)], [0.01, 0.02, 0.04, 0.05, 0.05])
        self.assertEqual(b.bound(10_000), 0.05)
        with self.assertRaises(ValueError):
            b.bound(0)

    def test_waits_are_drawn_uniformly_under_the_bound(self):
        b = Backoff(base=0.1, cap=10.0)
        rng = random.Random(1)
        for aborts in (1, 2, 5):
            waits = [b.delay(aborts, rng) for _ in range(2000)]
            bound = b.bound(aborts)
            self.assertTrue(all(0 <= w <= bound for w in waits))
            mean = sum(waits) / len(waits)
            self.assertAlmostEqual(mean, bound / 2, delta=bound * 0.05)
            self.assertGreater(len(set(waits)), 1900, "waits are randomized")

    def test_zero_retries_at_once_and_negative_is_refused(self):
        self.assertEqual(Backoff(base=0, cap=0).delay(3, random.Random()), 0.0)
        with self.assertRaises(ValueError):
            Backoff(base=-1)


class Retrying(unittest.TestCase):
    def run_with(self, outcomes, attempts=5, backoff=Backoff(base=0.01, cap=1.0)):
        """Run an attempt that raises each of `outcomes` in turn (a value is returned)."""
        calls, slept = [], []
        self.trying_for = []
        clock = [100.0]  # a fake monotonic clock that only sleeping moves

        def attempt(trying_for):
            calls.append(1)
            self.trying_for.append(trying_for)
            outcome = outcomes[len(calls) - 1]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        def sleep(seconds):
            slept.append(seconds)
            clock[0] += seconds

        try:
            result = retrying(attempt, attempts=attempts, backoff=backoff, sleep=sleep,
                              rng=random.Random(7), clock=lambda: clock[0])
        except BaseException as error:  # noqa: BLE001 - returned for the test to inspect
            result = error
        return result, len(calls), slept

    def test_retries_retryable_aborts_with_growing_waits_until_it_commits(self):
        outcomes = [aborted("write_write_conflict")] * 3 + ["done"]
        result, calls, slept = self.run_with(outcomes)
        self.assertEqual((result, calls), ("done", 4))
        self.assertEqual(len(slept), 3)
        for aborts, wait in enumerate(slept, start=1):
            self.assertLessEqual(wait, 0.01 * 2 ** (aborts - 1))

    def test_each_attempt_is_told_how_long_the_transaction_has_been_trying(self):
        outcomes = [aborted("wait_die")] * 3 + ["done"]
        _, _, slept = self.run_with(outcomes)
        self.assertEqual(self.trying_for[0], 0.0)
        for made in range(1, 4):
            self.assertAlmostEqual(self.trying_for[made], sum(slept[:made]))

    def test_gives_up_after_the_attempts_with_the_last_abort(self):
        outcomes = [aborted("wait_die") for _ in range(3)]
        result, calls, slept = self.run_with(outcomes, attempts=3)
        self.assertIs(result, outcomes[2])
        self.assertEqual((calls, len(slept)), (3, 2))
        self.assertIn("gave up after 3 attempts", " ".join(result.__notes__))

    def test_never_retries_what_cannot_pass(self):
        for outcome in (aborted("user_rollback", False), aborted("misspeculation", False),
                        aborted("invalid_request", True), aborted("wait_die", False),
                        request_error(grpc.StatusCode.DEADLINE_EXCEEDED, "", node="n",
                                      operation="commit", outcome_unknown=True),
                        KeyError("the body's own error")):
            with self.subTest(outcome=outcome):
                result, calls, slept = self.run_with([outcome, "not reached"])
                self.assertIs(result, outcome)
                self.assertEqual((calls, slept), (1, []))

    def test_one_attempt_means_no_retry_and_zero_is_refused(self):
        result, calls, _ = self.run_with([aborted("wait_die"), "x"], attempts=1)
        self.assertIsInstance(result, Aborted)
        self.assertEqual(calls, 1)
        result, calls, _ = self.run_with(["x"], attempts=0)
        self.assertIsInstance(result, ValueError)
        self.assertEqual(calls, 0)


if __name__ == "__main__":
    unittest.main()
