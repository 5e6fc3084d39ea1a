import unittest

from counter import count_words


class CountWordsTest(unittest.TestCase):
    def test_simple_sentence(self) -> None:
        self.assertEqual(count_words("the quick brown fox"), 4)

    def test_empty_text_has_no_words(self) -> None:
        self.assertEqual(count_words(""), 0)

    def test_runs_of_spaces_separate_once(self) -> None:
        self.assertEqual(count_words("two  words"), 2)


if __name__ == "__main__":
    unittest.main()
