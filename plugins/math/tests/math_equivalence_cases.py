"""The answer-equivalence cases: (solution text, ground truth, expected verdict, what it covers).

Written by hand with the verdict a careful grader would give; `test_math_equivalence.py`
checks the `math_answer` judge against every one.
"""

from __future__ import annotations

CASES: list[tuple[str, object, bool, str]] = [
    # fractions and decimals
    (r"So \boxed{\frac{1}{2}}.", "0.5", True, "latex fraction vs decimal"),
    (r"\boxed{1/2}", r"\frac{1}{2}", True, "slash fraction vs latex fraction"),
    (r"\boxed{0.5}", "1/2", True, "decimal vs slash fraction"),
    (r"\boxed{\dfrac{3}{4}}", "0.75", True, "dfrac"),
    (r"\boxed{\tfrac12}", "0.5", True, "tfrac without braces"),
    (r"\boxed{\frac{2}{4}}", r"\frac{1}{2}", False, "unreduced fraction (unevaluated: allow_expressions)"),
    (r"\boxed{0.333}", "1/3", False, "too coarse a decimal"),
    (r"\boxed{0.3333333}", "1/3", True, "decimal within a millionth"),
    (r"\boxed{3.0}", "3", True, "trailing zero"),
    (r"\boxed{7}", "7.00", True, "reference with trailing zeros"),
    (r"\boxed{10}", "10.5", False, "different decimals"),
    (r"\boxed{0.50}", r"\frac{1}{2}", True, "decimal with trailing zero vs fraction"),
    # percentages
    (r"\boxed{50\%}", "0.5", True, "percent vs fraction of one"),
    (r"\boxed{50\%}", "50", True, "percent vs bare number"),
    (r"\boxed{25%}", r"\frac{1}{4}", True, "plain percent sign"),
    (r"The answer is 12 percent.", "12", True, "percent as a word"),
    (r"\boxed{40\%}", "0.5", False, "wrong percent"),
    # negative numbers
    (r"\boxed{-3}", "-3", True, "negative"),
    (r"\boxed{3}", "-3", False, "sign dropped"),
    (r"\boxed{-\frac{1}{2}}", "-0.5", True, "negative fraction"),
    (r"\boxed{\frac{-1}{2}}", "-0.5", True, "negative numerator"),
    (r"\boxed{(-7)}", "-7", True, "parenthesized negative"),
    (r"\boxed{+7}", "7", True, "explicit plus"),
    # scientific notation
    (r"\boxed{1e3}", "1000", True, "e-notation"),
    (r"\boxed{2.5e-3}", "0.0025", True, "negative exponent e-notation"),
    (r"\boxed{1.5 \times 10^{3}}", "1500", True, "times ten to the power"),
    (r"\boxed{6.02\times10^{23}}", "602000000000000000000000", True, "big power of ten"),
    (r"\boxed{10^6}", "1000000", True, "bare power of ten"),
    (r"\boxed{1.5\times 10^{-3}}", "0.0015", True, "negative power of ten"),
    (r"\boxed{2e3}", "200", False, "wrong exponent"),
    # LaTeX wrappers
    (r"$\boxed{\text{12}}$", "12", True, "text inside a box"),
    (r"\boxed{\left( 1, 2 \right)}", "(1,2)", True, "left/right delimiters"),
    (r"\[ \boxed{x = 3} \]", "3", True, "assignment in a box"),
    (r"\boxed{90^\circ}", "90", True, "degrees"),
    (r"\boxed{\mathbf{42}}", "42", True, "bold"),
    (r"\boxed{\sqrt{2}/2}", r"\frac{\sqrt{2}}{2}", True, "surds, two spellings"),
    (r"\boxed{2\sqrt{3}}", r"\sqrt{12}", True, "simplified surd"),
    (r"\boxed{\pi}", "3.14159", False, "pi is not its approximation"),
    # units and currency
    (r"\boxed{12 \text{ cm}}", "12", True, "unit in text"),
    (r"\boxed{\text{12 cm}}", "12", True, "number and unit in one text"),
    (r"\boxed{12 dollars}", "12", True, "unit word inside a box"),
    (r"\boxed{\$18}", "18", True, "escaped dollar"),
    (r"The answer is $18.", "18", True, "dollar in prose"),
    (r"\boxed{5 apples}", "5", True, "counted things"),
    (r"\boxed{12 \text{ cm}}", "13", False, "wrong number with a unit"),
    # thousands separators
    (r"\boxed{1,000}", "1000", True, "comma thousands"),
    (r"\boxed{1{,}234{,}567}", "1234567", True, "latex braced commas"),
    (r"\boxed{1\,000}", "1000", True, "thin-space thousands"),
    (r"\boxed{\$1,234.50}", "1234.5", True, "currency, thousands and cents"),
    (r"\boxed{1,000}", "1", False, "thousands separator is not a decimal point"),
    # GSM8K-style and prose answers
    ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72", True, "#### marker"),
    ("She has 5 apples.\n#### 5", "Janet has 3 + 2 = 5 apples.\n#### 5", True, "GSM8K solution as reference"),
    ("So the final answer is 42.", "42", True, "the answer is"),
    ("Final answer: 17", "17", True, "final answer colon"),
    ("I think the result is 41.", "41", False, "no marker: no answer (strict)"),
    ("", "3", False, "empty solution"),
    # multiple boxes and no box
    (r"First \boxed{3}, then corrected: \boxed{4}", "4", True, "last box wins"),
    (r"First \boxed{4}, then corrected: \boxed{3}", "4", False, "earlier box does not count"),
    (r"\boxed{\frac{1}{\boxed{2}}}", r"\frac{1}{2}", True, "nested box"),
    (r"Unclosed \boxed{5", "5", False, "unclosed box"),
    (r"The answer is \boxed{5", "5", True, "an unclosed box after 'the answer is' still says 5"),
    # MATH-style references
    (r"\boxed{5}", r"We get $x = \boxed{5}$.", True, "boxed reference solution"),
    # sets and intervals
    (r"\boxed{\{1,2,3\}}", r"\{3,2,1\}", True, "set order"),
    (r"\boxed{\{1,2\}}", r"\{1,2,3\}", False, "missing element"),
    (r"\boxed{1, 2, 3}", "3,2,1", True, "list of solutions"),
    (r"\boxed{2,3}", "2,4", False, "different solutions"),
    (r"\boxed{(1,2]}", "(1,2]", True, "half-open interval"),
    (r"\boxed{(1,2)}", "[1,2]", False, "open vs closed interval"),
    (r"\boxed{[0,\infty)}", r"[0, \infty)", True, "unbounded interval"),
    (r"\boxed{(-\infty, 3)}", r"(-\infty,3)", True, "interval to minus infinity"),
    (r"\boxed{[1,2] \cup [3,4]}", r"[1,2]\cup[3,4]", True, "union of intervals"),
    # matrices
    (r"\boxed{\begin{pmatrix}1&2\\3&4\end{pmatrix}}", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", True, "matrix"),
    (r"\boxed{\begin{pmatrix}1&2\\3&4\end{pmatrix}}", r"\begin{pmatrix}1&2\\3&5\end{pmatrix}", False,
     "matrix entry differs"),
    (r"\boxed{\begin{bmatrix}1\\2\end{bmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}", True, "bmatrix vs pmatrix"),
    # expressions
    (r"\boxed{x^2+2x+1}", "(x+1)^2", True, "expanded polynomial"),
    (r"\boxed{3+2i}", "2i+3", True, "complex number"),
    (r"\boxed{2x}", "2", False, "an expression is not its coefficient"),
    # answers that cannot be parsed: reward 0, never an exception
    (r"\boxed{\frac{}{}}", "1", False, "empty fraction"),
    (r"\boxed{}", "1", False, "empty box"),
    (r"\boxed{???}", "1", False, "garbage in a box"),
]
