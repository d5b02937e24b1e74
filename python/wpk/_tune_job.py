"""The process wpk.tune starts: reads the job (JSON) on stdin, tunes with the extension module,
writes one JSON line on stdout: {"summary": ...} or {"kind", "status", "message"}. The tuner's
log lines go to stderr."""
import json
import sys


def main():
    job = json.loads(sys.stdin.read())
    from wpk import _wpk
    try:
        summary = _wpk.tune(job["model"], job["db"], job["strategy"], job["trials"],
                            job["time_s"], job["seed"], job["opt_level"], job["parallel"],
                            job["timeout_s"], job["alternatives"], job["clock"], job["verbose"])
        answer = {"summary": summary}
    except _wpk.WpkError as e:
        answer = {"kind": "WpkError", "status": getattr(e, "status", ""), "message": str(e)}
    except (ValueError, TypeError, MemoryError) as e:
        answer = {"kind": type(e).__name__, "message": str(e)}
    print(json.dumps(answer), flush=True)
    return 0 if "summary" in answer else 1


if __name__ == "__main__":
    sys.exit(main())
