"""gRPC failures as the client's exceptions: which node, what failed, what to do."""

import unittest

import grpc

import support  # noqa: F401 - the package from this source tree

from augur_client import (
    AugurError,
    DeadlineExceeded,
    InvalidRequest,
    Overloaded,
    RequestError,
    Unauthenticated,
    Unavailable,
)
from augur_client._errors import from_rpc_error, request_error

NODE = "node 1 at 127.0.0.1:9002"


def error(code, details="", operation="get", **kw):
    return request_error(code, details, node=NODE, operation=operation, **kw)


class Mapping(unittest.TestCase):
    def test_each_code_has_its_exception(self):
        expected = {
            grpc.StatusCode.UNAVAILABLE: Unavailable,
            grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
            grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
            grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
            grpc.StatusCode.FAILED_PRECONDITION: InvalidRequest,
            grpc.StatusCode.RESOURCE_EXHAUSTED: Overloaded,
            grpc.StatusCode.INTERNAL: RequestError,
            grpc.StatusCode.CANCELLED: RequestError,
            grpc.StatusCode.UNIMPLEMENTED: RequestError,
            None: RequestError,
        }
        for code, cls in expected.items():
            with self.subTest(code=code):
                e = error(code, "details")
                self.assertIs(type(e), cls)
                self.assertIsInstance(e, AugurError)
                self.assertEqual((e.node, e.operation, e.code), (NODE, "get", code))
                self.assertIn(NODE, str(e))

    def test_a_deadline_says_which_node_what_and_how_long(self):
        e = error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", timeout=2.5)
        self.assertEqual(e.timeout, 2.5)
        self.assertIn(f"no answer to get to {NODE} within 2.5 s", str(e))
        self.assertIn("paused", str(e))
        self.assertIn("timeout=", str(e))
        self.assertFalse(e.outcome_unknown)

    def test_a_commit_without_answer_has_an_unknown_outcome(self):
        for code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
            with self.subTest(code=code):
                e = error(code, "no reply within 10s", operation="commit", outcome_unknown=True)
                self.assertTrue(e.outcome_unknown)
                self.assertIn("Whether the transaction committed is unknown", str(e))
        # A commit the node refused did not happen.
        e = error(grpc.StatusCode.INVALID_ARGUMENT, "bad", operation="commit", outcome_unknown=True)
        self.assertFalse(e.outcome_unknown)
        self.assertNotIn("unknown", str(e))
        # Nor did one gRPC could not send: no connection to the node was made.
        e = error(
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect to all addresses; last error: Connection refused",
            operation="Transact",
            outcome_unknown=True,
        )
        self.assertFalse(e.outcome_unknown)
        self.assertNotIn("unknown", str(e))

    def test_messages_say_what_to_do(self):
        cases = {
            grpc.StatusCode.UNAVAILABLE: (
                "failed to connect to all addresses; last error: Connection refused",
                "Check that the node is running",
            ),
            grpc.StatusCode.UNAUTHENTICATED: ("wrong client token", "client_token_file"),
            grpc.StatusCode.INVALID_ARGUMENT: (
                "key of 2000 bytes exceeds the limit", "would fail again"),
            grpc.StatusCode.RESOURCE_EXHAUSTED: ("limits.max_clients", "Close the sessions"),
            grpc.StatusCode.INTERNAL: ("unexpected reply", "report it"),
        }
        for code, (details, advice) in cases.items():
            with self.subTest(code=code):
                message = str(error(code, details))
                self.assertIn(details, message)
                self.assertIn(advice, message)

    def test_a_tls_failure_points_to_the_ca_and_name(self):
        e = error(grpc.StatusCode.UNAVAILABLE, "Ssl handshake failed: CERTIFICATE_VERIFY_FAILED")
        self.assertIn("security.ca", str(e))
        self.assertIn("node-ID.augur", str(e))

    def test_from_a_grpc_error(self):
        class Failed(grpc.RpcError, grpc.Call):
            def code(self):
                return grpc.StatusCode.UNAUTHENTICATED

            def details(self):
                return "this cluster requires a client token"

            # The rest of grpc.Call, unused.
            initial_metadata = trailing_metadata = is_active = time_remaining = None
            cancel = add_callback = None

        e = from_rpc_error(Failed(), node=NODE, operation="Status")
        self.assertIsInstance(e, Unauthenticated)
        self.assertEqual(e.details, "this cluster requires a client token")


if __name__ == "__main__":
    unittest.main()
