"""Keys and values: bytes or str, anything else refused with a TypeError that says what to do."""

import unittest

import support  # noqa: F401 - the package from this source tree

from augur_client._values import key_bytes, read_keys, value_bytes, write_pairs


class KeysAndValues(unittest.TestCase):
    def test_bytes_and_str_are_taken(self):
        self.assertEqual(key_bytes("acct:é"), "acct:é".encode())
        self.assertEqual(key_bytes(b"k"), b"k")
        self.assertEqual(key_bytes(bytearray(b"k")), b"k")
        self.assertEqual(key_bytes(memoryview(b"k")), b"k")
        self.assertEqual(value_bytes("100", "k"), b"100")
        self.assertEqual(value_bytes(b"\x00\x01", "k"), b"\x00\x01")
        self.assertEqual(value_bytes("", "k"), b"")

    def test_a_number_is_refused_not_turned_into_zero_bytes(self):
        # bytes(5) is five zero bytes: what writes={"k": 5} used to store.
        with self.assertRaises(TypeError) as caught:
            value_bytes(5, "acct:alice")
        message = str(caught.exception)
        self.assertIn("'acct:alice'", message)
        self.assertIn("bytes or str, not int (5)", message)
        self.assertIn("str(value)", message)
        for bad in (5, 1.5, True, [1, 2], {"a": 1}, object()):
            with self.subTest(value=bad), self.assertRaises(TypeError):
                value_bytes(bad, "k")
            with self.subTest(key=bad), self.assertRaises(TypeError):
                key_bytes(bad)

    def test_a_none_value_points_to_delete(self):
        with self.assertRaisesRegex(TypeError, r"delete\(key\)"):
            value_bytes(None, "k")

    def test_a_key_that_is_not_bytes_or_str_is_refused(self):
        with self.assertRaisesRegex(TypeError, r"a key must be bytes or str, not int \(7\)"):
            key_bytes(7)
        with self.assertRaisesRegex(TypeError, r"not NoneType"):
            key_bytes(None)

    def test_long_values_are_shortened_in_messages(self):
        with self.assertRaises(TypeError) as caught:
            value_bytes(list(range(1000)), "k")
        self.assertLess(len(str(caught.exception)), 250)

    def test_one_shot_reads_are_a_list_of_keys(self):
        self.assertEqual(read_keys(["a", b"b"]), [b"a", b"b"])
        self.assertEqual(read_keys(k for k in ("x",)), [b"x"])
        # A single str would otherwise be read as one key per character.
        with self.assertRaisesRegex(TypeError, r"reads=\['acct:alice'\]"):
            read_keys("acct:alice")
        with self.assertRaises(TypeError):
            read_keys(b"acct:alice")
        with self.assertRaises(TypeError):
            read_keys([1])

    def test_one_shot_writes_are_a_mapping_none_deletes(self):
        self.assertEqual(write_pairs(None), [])
        self.assertEqual(write_pairs({"a": "1", b"b": None}), [(b"a", b"1"), (b"b", None)])
        with self.assertRaisesRegex(TypeError, r"the value for key 'k' must be bytes or str, not int"):
            write_pairs({"k": 5})
        with self.assertRaisesRegex(TypeError, r"a key must be bytes or str"):
            write_pairs({5: "v"})
        with self.assertRaisesRegex(TypeError, r"mapping of key to value"):
            write_pairs([("k", "v")])


if __name__ == "__main__":
    unittest.main()
