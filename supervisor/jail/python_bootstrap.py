# The program a prepared jail's Python interpreter runs while it waits for its call (supervisor/jail/
# interpreter.c writes the call; jail.h, jail_prepared_run, says what it does). Run as `python3 -c`, with
# fd 3 the call's stream (the call's length, the call, then the go byte) and fd 4 the jail's control
# socket: a jail_sync_message SYNC_PREPARED (4) once started, SYNC_ERROR (3) on failure, as the jail's
# child sends them. Embedded at build time; comments are stripped.
# Everything it defines is deleted before the code runs: __main__ holds what a fresh `-c` has, sys.modules
# and sys.path_importer_cache hold nothing of its own imports, and its frame, the code's caller, holds
# the code's text and no other data of the call (take_call's frame is gone).
def _(m=__import__('sys').modules):
    import os, sys
    own = (sys._getframe().f_code, sys._getframe(1).f_code)
    def take_call():
        before, cached = set(m), set(sys.path_importer_cache)
        import ctypes
        call = ctypes.CDLL(None, use_errno=True).syscall
        call.restype = ctypes.c_long
        errno = ctypes.get_errno
        loaded = [k for k in m if k not in before]
        added = [k for k in sys.path_importer_cache if k not in cached]
        os.write(4, (4).to_bytes(4, 'little') + bytes(260))
        def read(n):
            chunks = []
            while n > 0:
                try:
                    b = os.read(3, n if n < 262144 else 262144)
                except InterruptedError:
                    continue
                if not b:
                    os._exit(125)
                chunks.append(b)
                n -= len(b)
            return b''.join(chunks)
        data = read(int.from_bytes(read(8), 'little'))
        fields, at = [], 0
        while at + 8 <= len(data):
            n = int.from_bytes(data[at:at + 8], 'little')
            fields.append(data[at + 8:at + 8 + n])
            at += 8 + n
        del data
        def fail(e, step, detail=None):
            t = step.encode() + (b'' if detail is None else b' `' + detail + b'`')
            os.write(4, (3).to_bytes(4, 'little') + (e or 5).to_bytes(4, 'little') + t[:255].ljust(256, b'\0'))
            os._exit(127)
        take = iter(fields).__next__
        try:
            if take() != b'dome-python-call-2':
                raise ValueError
            argv0, code, cwd = take(), take(), take()
            env = [take() for i in range(int(take()))]
            entries = [(take(), take(), int(take()), take()) for i in range(int(take()))]
            abi, attr = int(take()), take()
            rules = [(take(), int(take()), int(take()), take() == b'1', take() == b'1') for i in range(int(take()))]
        except (StopIteration, ValueError):
            fail(71, 'decode the call')
        del fields, take
        for kind, path, mode, content in entries:
            try:
                if kind == b'd':
                    try:
                        os.mkdir(path, mode)
                    except FileExistsError:
                        pass
                elif kind == b'l':
                    os.symlink(content, path)
                else:
                    step = 'create file'
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
                    step = 'write file'
                    view = memoryview(content)
                    while view:
                        view = view[os.write(fd, view):]
                    os.close(fd)
            except OSError as x:
                fail(x.errno, 'mkdir' if kind == b'd' else 'symlink' if kind == b'l' else step, path)
        del entries
        try:
            os.chdir(cwd)
        except OSError as x:
            fail(x.errno, 'working directory', cwd)
        if abi > 0:
            ruleset = call(444, attr, len(attr), 0)
            if ruleset < 0:
                fail(errno(), 'landlock_create_ruleset')
            for path, directory_access, file_access, optional, exact in rules:
                directory = True
                try:
                    try:
                        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                    except NotADirectoryError:
                        directory = False
                        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except (FileNotFoundError, NotADirectoryError) as x:
                    if optional:
                        continue
                    fail(x.errno, 'landlock rule path', path)
                except OSError as x:
                    fail(x.errno, 'landlock rule path', path)
                allowed = 0 if directory and exact else directory_access if directory else file_access
                beneath = allowed.to_bytes(8, 'little') + fd.to_bytes(4, 'little')
                if allowed and call(445, ruleset, 1, beneath, 0) < 0:
                    fail(errno(), 'landlock_add_rule', path)
                os.close(fd)
            if call(446, ruleset, 0) < 0:
                fail(errno(), 'landlock_restrict_self')
            os.close(ruleset)
        environment = os.environb
        for key in list(environment):
            del environment[key]
        for item in env:
            key, sign, value = item.partition(b'=')
            if sign and key:
                environment[key] = value
        text = code.decode('utf-8', 'surrogateescape')
        sys.orig_argv = [os.fsdecode(argv0), '-c', text]
        for name in loaded:
            del m[name]
        for key in added:
            sys.path_importer_cache.pop(key, None)
        if read(1) != b'\x01':
            os._exit(125)
        return text
    text = take_call()
    del take_call
    g = m['__main__'].__dict__
    del g['_']
    os.close(4)
    os.close(3)
    # exec of the text itself, as `-c` runs it: compile() would first build the interpreter's AST types
    # (PyAST_Check, ~1.4 ms and ~600 objects a fresh `-c` never makes); no __future__ flag is inherited here.
    try:
        exec(text, g)
    except SystemExit:
        raise
    except BaseException:
        hook = sys.excepthook
        def strip(kind, value, tb):
            sys.excepthook = hook
            while tb is not None and tb.tb_frame.f_code in own:
                tb = tb.tb_next
            hook(kind, value.with_traceback(tb), tb)
        sys.excepthook = strip
        raise
_()
