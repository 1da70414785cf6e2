"""Llama objects free their memory when dropped."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import gc, sys
    from synapse import Llama

    def rss_kb():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

    path = sys.argv[1]
    base = rss_kb()
    llm = Llama(path, n_ctx=2048, verbose=False)
    llm("Once upon a time", max_tokens=8)
    first = rss_kb() - base
    del llm
    gc.collect()
    for _ in range(99):
        llm = Llama(path, n_ctx=2048, verbose=False)
        llm("Once upon a time", max_tokens=8)
        del llm
    gc.collect()
    print(first, rss_kb() - base)
""")


def test_hundred_objects_do_not_grow_rss(stories_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, stories_path], check=True, capture_output=True, text=True)
    first, growth = map(int, out.stdout.split())
    print(f"\nRSS: one Llama {first} kB; after 100 created and dropped +{growth} kB")
    assert first > 0
    assert growth <= first
