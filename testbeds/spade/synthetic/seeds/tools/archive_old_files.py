# skill: multi-step workflows
class ArchiveOldFilesEnv(ToolEnv):
    max_turns = 12

    def setup(self, rng):
        files = {f"report_{rng.randint(100, 999)}_{i}.txt": rng.randint(2015, 2024) for i in range(5)}
        self.cutoff = rng.randint(2018, 2022)
        if not any(year < self.cutoff for year in files.values()):
            files[f"report_{rng.randint(100, 999)}_old.txt"] = self.cutoff - 1
        self.state = {"folders": {"inbox": dict(files)}}
        self.initial = dict(files)
        return (f"Create a folder named archive, move every file in inbox last modified before "
                f"{self.cutoff} into it, and answer with the number of files you moved.")

    def tool_list_files(self, folder: str) -> dict:
        """Return the files of a folder with their last-modified year."""
        if folder not in self.state["folders"]:
            raise ValueError(f"no folder {folder!r}")
        return dict(self.state["folders"][folder])

    def tool_create_folder(self, name: str) -> str:
        """Create an empty folder."""
        if name in self.state["folders"]:
            raise ValueError(f"folder {name!r} exists")
        self.state["folders"][name] = {}
        return "created"

    def tool_move_file(self, name: str, source: str, target: str) -> str:
        """Move one file from a folder to another existing folder."""
        folders = self.state["folders"]
        if source not in folders or target not in folders:
            raise ValueError("both folders must exist (create the target first)")
        if name not in folders[source]:
            raise ValueError(f"no file {name!r} in {source}")
        folders[target][name] = folders[source].pop(name)
        return "moved"

    def _old(self):
        return sorted(n for n, year in self.initial.items() if year < self.cutoff)

    def expected_answer(self):
        return str(len(self._old()))

    def check_state(self):
        archive = self.state["folders"].get("archive")
        return archive is not None and sorted(archive) == self._old()

    def solution(self):
        calls = [{"name": "list_files", "arguments": {"folder": "inbox"}},
                 {"name": "create_folder", "arguments": {"name": "archive"}}]
        calls += [{"name": "move_file", "arguments": {"name": n, "source": "inbox", "target": "archive"}}
                  for n in self._old()]
        return calls + [{"answer": self.expected_answer()}]
