"""The tiny tokenizer's training text: the words of every example and test the project ships.

A byte-level BPE with 1024 or so entries can only give short codes to the text it was trained on;
anything else falls apart into single bytes (`"open door"` was 5 tokens with a corpus of grid
games alone). So the corpus covers what the tiny model is asked to read and write in the
examples, the docs' walk-throughs and the tests: grid games (FrozenLake, Taxi, CliffWalking),
arithmetic and word problems with their answer formats, text adventures, a number-guessing game,
code that calls app APIs (AppWorld), JSON, chat roles, and the self-evolving parts' prompts
(exploration, experience, step judgments). The text is our own; it is deterministic (no
randomness), and any change to it rebuilds the tiny model (its fingerprint in `tiny.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

_PROSE = """\
You are an agent playing a grid game. Read the observation and answer with one action.
Valid actions are left, right, up and down. Any other answer is an invalid action.
You are on a frozen lake. Walk from the start to the goal without falling into a hole.
The lake is slippery, so you may not always move in the direction you chose.
S is the start, F is frozen ice, H is a hole and G is the goal.
If you step into a hole the episode ends with a reward of 0. Reaching the goal gives a reward of 1.
You are a taxi driver in a 5 by 5 grid. Pick up the passenger and drop them off at the destination.
The actions are south, north, east, west, pickup and dropoff. Illegal pickup or dropoff costs 10 points.
Each step costs 1 point. A successful dropoff gives 20 points.
The locations are Red, Green, Yellow and Blue. The passenger is waiting at Red and wants to go to Blue.
You are walking along a cliff. Move from the start in the bottom left corner to the goal in the bottom right corner.
Stepping off the cliff costs 100 points and sends you back to the start. Every other step costs 1 point.
Observation: you are at row 3, column 2. The goal is at row 3, column 3.
Think step by step, then give your final answer.
Your answer must be a single word: left, right, up or down.
Respond in JSON with the key "action", for example {"action": "left"}.
That action is invalid. Please choose one of the valid actions.
The episode is over. You reached the goal in 6 steps.
Solve the problem and put the final answer at the end.
What is the sum of the numbers? What is the difference? What is the product?
The answer is a number. Show your work and check it again.
This is a new task. Please read the instructions carefully before you start.
The user asks a question and the assistant answers it. The assistant is helpful and brief.
I will move down first, then right, then down again until I reach the goal.
There is a hole to the right, so I should go down instead.
The wall is in the way, so the move has no effect and I stay in the same cell.
Hello! How can I help you today? Thank you, that is correct. Good job.
Yes, no, maybe. It is true that the first row is safe, but the second row has two holes.
The state is the number of the cell: row times the number of columns plus column.
Answer with one action only. Do not explain your answer. Do not repeat the question.
The agent learns from its own experience: it explores the environment, writes new tasks and trains on them.
A policy maps each observation to an action. The value of a state is the expected return from it.
We sample several answers for each task, score them with a reward function and compare them within the group.
Better answers get a positive advantage and worse answers get a negative advantage.
Your previous action moved you one cell to the left. You can see the whole map below.
The map has four rows and four columns. The first row is at the top and the first column is on the left.
The passenger is in the taxi. Drive to the destination and drop off the passenger.
The taxi is at row 2, column 1. The passenger is at Yellow. The destination is Green.
You have 100 steps left. The maximum number of steps is 100. The time is up.
Please write your reasoning inside <think> and </think>, then the answer inside <answer> and </answer>.
Here is an example of a good answer. Here is the history of your previous moves.
The weather is nice today, and the people in the small town are happy to see the sun again.
She said that they would come back next week, after the long holiday, if the road was open.
He could not find the key, so he looked under the table, behind the door and in every box.
It was a long day at work. We had a lot of things to do, but we did all of them well.
Please read the file, find the error and fix it. Then run the tests again and report the result.
The quick brown fox jumps over the lazy dog. A small cat sleeps in the warm light of the window.
Name the object, count the items, compare the values, and write the result as a list.
Good morning. Good evening. Good night. See you later. Have a nice day. You are welcome.
You are playing FrozenLake. You are playing Taxi. You are playing CliffWalking. You are playing Sokoban.
Which action do you take? Which way do you go? Reply with the action you take. Reply with one word.
Take a step. Take the passenger. Which cell is safe? Which move is best? Reply now.
system
user
assistant
"""

ACTIONS = ("left", "right", "up", "down")
TAXI_ACTIONS = ("south", "north", "east", "west", "pickup", "dropoff")
_TILES = "SFHG"
_FROZEN_LAKE_MAPS = (
    ("SFFF", "FHFH", "FFFH", "HFFG"),
    ("SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF", "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG"),
)


def _grid_lines() -> Iterator[str]:
    for grid in _FROZEN_LAKE_MAPS:
        size = len(grid)
        yield "\n".join(grid)
        for row in range(size):
            for column in range(size):
                tile = grid[row][column]
                name = {"S": "start", "F": "frozen", "H": "hole", "G": "goal"}[tile]
                yield f"You are at row {row}, column {column}. The cell is {name} ({tile})."
                yield f"Current position: ({row}, {column}). State: {row * size + column}."
    for column in range(12):
        yield f"The cliff is at row 3, column {column}. Do not step on the cliff."


def _action_lines() -> Iterator[str]:
    for action in ACTIONS + TAXI_ACTIONS:
        capital = action.capitalize()
        yield f"Action: {action}\n{action}\nI choose {action}. Move {action}. {capital} is a valid action."
        yield f'{{"action": "{action}"}} ["{action}"] <action>{action}</action> {capital}. {action.upper()}'
        yield f"Moving {action} is invalid here, try another action. Invalid action: {action}."
        yield f"{capital}\n{action}\n{capital}\ninvalid\n{action}"
    for first in ACTIONS:
        for second in ACTIONS:
            yield f"I moved {first} and then {second}. Next: {second}, {first}. {first.capitalize()}, {second}."


def _arithmetic_lines() -> Iterator[str]:
    for a in range(0, 40, 3):
        for b in range(1, 30, 2):
            yield f"{a} + {b} = {a + b}. {a + b} - {b} = {a}. {a} * {b} = {a * b}."
            yield f"What is {a} + {b}? The answer is {a + b}."
    for n in range(0, 1001, 37):
        yield f"[{n}, {n + 1}, {n + 2}] {{\"value\": {n}, \"next\": {n + 1}}} {n / 4:.2f} {-n}"


def _chat_lines() -> Iterator[str]:
    for role in ("system", "user", "assistant"):
        yield f'{{"role": "{role}", "content": "Move left."}}'
    yield '{"task_id": "frozenlake-0", "query": "Reach the goal.", "reward": 1.0, "done": true, "ok": false}'
    yield "(a) [b] {c} <d> 'e' \"f\" a, b; c: d! e? f... g - h / i = j % k & l | m # n @ o $ p ^ q ~ r _ s"


_ADVENTURE_VERBS = ("open", "close", "take", "drop", "examine", "look at", "unlock", "push", "pull", "eat", "read")
_ADVENTURE_THINGS = ("door", "key", "box", "chest", "lamp", "book", "apple", "table", "window", "letter", "map")
_DIRECTIONS = ("north", "south", "east", "west", "up", "down")


def _adventure_lines() -> Iterator[str]:
    """Text adventures: commands, rooms and the game's replies."""
    for verb in _ADVENTURE_VERBS:
        for thing in _ADVENTURE_THINGS:
            yield f"> {verb} {thing}\nYou {verb} the {thing}. {verb} {thing}"
    for direction in _DIRECTIONS:
        yield f"> go {direction}\nYou go {direction}. There is a door to the {direction}. go {direction}"
    yield "You are in a small kitchen. There is a table with a red apple on it. A closed door leads north."
    yield "> inventory\nYou are carrying: a brass key, a lamp. > look\nYou see a locked chest."
    yield "> unlock chest with key\nThe chest is now open. Inside is a letter. You win! Your score is 10 of 10."
    yield "That is not a verb I recognise. You can't go that way. The door is locked. Nothing happens."


def _guessing_lines() -> Iterator[str]:
    """The number-guessing game of docs/writing-an-environment.md and friends."""
    yield "Guess a number between 1 and 100. You have 7 guesses. Reply with a number."
    for guess in (50, 25, 75, 12, 88, 63, 37, 99, 1, 100):
        yield f"Your guess {guess} is too high. Try a lower number. Your guess {guess} is too low. Guess: {guess}"
    yield "Correct! You found the number in 4 guesses. Out of guesses: the number was 42. Not a number."


_WORD_PROBLEMS = (
    "Mia has 12 apples. She gives 5 to her brother and buys 8 more. How many apples does she have now?",
    "A train travels 60 miles per hour for 3 hours. How far does it go? It goes 60 * 3 = 180 miles.",
    "Tom reads 20 pages a day. How many days does he need to read a book of 140 pages? 140 / 20 = 7 days.",
    "A shop sells pens for $2 each and notebooks for $5 each. Sara buys 3 pens and 2 notebooks. "
    "How much does she pay? 3 * 2 + 2 * 5 = 16 dollars.",
    "There are 4 boxes with 15 eggs in each box. Half of the eggs are brown. How many eggs are brown?",
    "The price was 80 dollars and it is 25% off. What is the new price? 80 - 20 = 60. The answer is 60.",
    "Natalie had 3 times as many marbles as Ben. Together they had 48. How many marbles did Ben have?",
)


def _math_lines() -> Iterator[str]:
    """Word problems and the answer formats the math judges read."""
    yield from _WORD_PROBLEMS
    for answer in (7, 12, 16, 30, 48, 60, 72, 180, 3.5, -4):
        yield f"The final answer is \\boxed{{{answer}}}. #### {answer} <answer>{answer}</answer> Answer: {answer}"
    yield "Solve the math problem step by step. Put the final answer in \\boxed{}. Answer with the number only."
    yield "Let x be the number of apples. Then 2x + 3 = 11, so 2x = 8 and x = 4. Check: 2 * 4 + 3 = 11."
    yield "```python\nprint(3 * 2 + 2 * 5)\n```\n```output\n16\n``` The tool printed 16, so the answer is 16."
    yield "You may run Python code to compute: write it in a ```python block; you will see what it prints."


_APPS = ("spotify", "venmo", "gmail", "amazon", "phone", "file_system", "simple_note", "splitwise", "todoist")


def _code_lines() -> Iterator[str]:
    """Python that calls app APIs, as the AppWorld workflow writes it, and what the APIs print."""
    for app in _APPS:
        yield f'print(apis.api_docs.show_api_descriptions(app_name="{app}"))'
        yield f'token = apis.{app}.login(username=email, password=passwords["{app}"])["access_token"]'
        yield f'print(apis.api_docs.show_api_doc(app_name="{app}", api_name="login"))'
    yield "print(apis.api_docs.show_app_descriptions())\npasswords = apis.supervisor.show_account_passwords()"
    yield "```python\nfor page_index in range(10):\n    page = apis.spotify.show_playlist_library(" \
          "access_token=token, page_index=page_index)\n    if not page:\n        break\n    playlists += page\n```"
    yield "songs = [song for playlist in playlists for song in playlist[\"songs\"]]\nprint(len(songs), max(songs))"
    yield "apis.supervisor.complete_task(answer=len(songs))\napis.supervisor.complete_task()"
    yield 'balance = apis.venmo.show_account(access_token=token)["balance"]\nprint(f"balance: {balance}")'
    yield '{"playlist_id": 12, "title": "Road trip", "song_ids": [3, 8, 21], "is_public": false}'
    yield "Traceback (most recent call last):\nKeyError: 'access_token'\nNameError: name 'token' is not defined"
    yield "def solve(numbers: list[int]) -> int:\n    total = 0\n    for n in numbers:\n        total += n\n" \
          "    return total\n\nif __name__ == \"__main__\":\n    import json, math\n    print(solve([1, 2, 3]))"
    yield "[... output truncated: 1200 more characters ...] The code block ran without output. None True False"


def _self_evolve_lines() -> Iterator[str]:
    """The prompts of exploration, task writing, experience and step judgments."""
    yield "Explore the environment: try actions and see what they do. Then write a new task you could solve."
    yield "Here are experiences from similar tasks. Use them if they help: 1. Log in before you call other APIs."
    yield "Step 1: ACTION: go north OBSERVATION: You are in the hall. Step 2: ACTION: open door OBSERVATION: ok."
    yield "Was this step GOOD or BAD for the task? Answer GOOD or BAD for each step. Step 1: GOOD. Step 2: BAD."
    yield "The task failed: the final answer was wrong. The task succeeded: the answer matched the ground truth."
    yield "Judge the answer. Score from 0 to 1. The reference answer is 72. The response is correct. Reason:"
    yield '{"query": "Reach the goal in the bottom right corner.", "answer": "down, right", "feasible": true}'


def corpus() -> list[str]:
    """The training text for the tiny tokenizer (deterministic: no randomness)."""
    lines = _PROSE.splitlines()
    for generate in (_grid_lines, _action_lines, _arithmetic_lines, _chat_lines, _adventure_lines, _guessing_lines,
                     _math_lines, _code_lines, _self_evolve_lines):
        lines.extend(generate())
    return lines
