"""The batch graph's drawing (queuelog/web/graph.py): layers, wrapping, arrows, links and escaping. The
page that shows it is tested in test_batch_pages.py and, in Chromium, tests/e2e/test_batch_layout.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from queuelog.web.graph import COLUMNS, NODE_H, WIDTH, Node, draw, layers

SVG = "{http://www.w3.org/2000/svg}"
NAMES = {"completed": "erledigt", "waiting": "wartend", "pending": "wartet auf Start"}


def drawn(nodes):
    markup = draw(nodes, "/queue/", NAMES, "Graph")
    return markup, ET.fromstring(str(markup))


def boxes(root):
    """Each node's (id, x, y) as drawn."""
    found = {}
    for link in root.iter(f"{SVG}a"):
        rect = link.find(f"{SVG}rect")
        job_id = int(link.get("href").rsplit("/", 1)[1])
        found[job_id] = (int(rect.get("x")), int(rect.get("y")))
    return found


def test_a_chain_puts_each_job_one_row_below_its_dependency():
    chain = [Node(1, "completed", "a")] + [Node(i, "waiting", "a", (i - 1,)) for i in range(2, 6)]
    assert [[n.id for n in layer] for layer in layers(chain)] == [[1], [2], [3], [4], [5]]
    _, root = drawn(chain)
    places = boxes(root)
    ys = [places[i][1] for i in range(1, 6)]
    assert ys == sorted(ys) and len(set(ys)) == 5
    lines = list(root.iter(f"{SVG}line"))
    assert len(lines) == 4
    for line in lines:  # every arrow points down, from a box's bottom to the next box's top
        assert int(line.get("y2")) > int(line.get("y1"))


def test_a_job_sits_below_the_deepest_of_its_dependencies():
    nodes = [
        Node(1, "completed", "a"),
        Node(2, "completed", "a", (1,)),
        Node(3, "waiting", "a", (1, 2)),  # depth 2, not 1
        Node(4, "pending", "a"),
    ]
    assert [[n.id for n in layer] for layer in layers(nodes)] == [[1, 4], [2], [3]]


def test_a_wide_layer_wraps_and_the_drawing_keeps_its_width():
    fan = [Node(1, "completed", "root")] + [Node(i, "waiting", "t", (1,)) for i in range(2, 2 + 3 * COLUMNS)]
    _, root = drawn(fan)
    assert int(root.get("width")) == WIDTH <= 380  # shown at nearly its own size on a 390 px phone
    places = boxes(root)
    rows = {y for _, y in places.values()}
    assert len(rows) == 1 + 3  # the root's row, then 3 full rows of COLUMNS
    assert max(x for x, _ in places.values()) + 80 <= WIDTH
    assert len(list(root.iter(f"{SVG}line"))) == 3 * COLUMNS


def test_dependencies_outside_the_batch_draw_no_arrow():
    _, root = drawn([Node(10, "waiting", "a", (3,)), Node(11, "waiting", "a", (10, 4))])
    assert len(list(root.iter(f"{SVG}line"))) == 1
    assert boxes(root)[11][1] - boxes(root)[10][1] >= NODE_H


def test_each_job_links_to_its_page_and_says_its_status_in_words():
    markup, root = drawn([Node(7, "pending", "email"), Node(8, "odd", "email", (7,))])
    links = {a.get("href"): [t.text for t in a.iter(f"{SVG}text")] for a in root.iter(f"{SVG}a")}
    assert links == {"/queue/7": ["#7", "wartet auf Start"], "/queue/8": ["#8", "odd"]}
    assert root.get("aria-label") == "Graph" and root.get("role") == "img"
    assert 'class="node g-pending"' in markup


def test_names_are_escaped():
    markup, root = drawn([Node(1, "pending", '<script>alert("x")</script>')])
    assert "<script>" not in markup
    assert root.find(f"{SVG}g/{SVG}a/{SVG}title").text == '#1 <script>alert("x")</script>: wartet auf Start'


def test_an_empty_batch_draws_an_empty_picture():
    markup, root = drawn([])
    assert list(root.iter(f"{SVG}a")) == [] and int(root.get("height")) > 0
    assert re.search(r'viewBox="0 0 \d+ \d+"', markup)
