"""Option tables of the programs that create, copy, move, delete, pack and fetch files (their rules are in
``rules.py`` and ``files.py``), as their GNU / Info-ZIP / rsync / curl / wget manuals list them.

Options that delete, run or write are marked (``>`` writes its value, ``!`` runs it, ``*`` the rule acts
on it) or risky: an archiver that removes its inputs (``tar --remove-files``, ``zip -m``), an extraction
that unlinks what is in the way (``tar --recursive-unlink``/``-U``, ``unzip -:``), a sync that deletes
(``rsync --delete*``, ``--remove-source-files``). A backup suffix with a ``/`` puts the backup in another
directory, so suffixes must be plain names.
"""

from __future__ import annotations

from tools.shell.options import Spec
from tools.shell.options import spec as S

_GNU = " help version"
PLAIN_SUFFIX = r"[^/]*"
_BACKUP = "backup?= suffix="
_COPY_LONG = ("archive attributes-only " + _BACKUP + " copy-contents debug dereference force interactive link "
              "no-clobber no-dereference no-preserve= parents preserve?= recursive reflink?= remove-destination "
              "sparse= strip-trailing-slashes symbolic-link *target-directory= no-target-directory update?= verbose "
              "one-file-system context?= keep-directory-symlink" + _GNU)
_SUFFIXES = {"-S": PLAIN_SUFFIX, "--suffix": PLAIN_SUFFIX}

_TAR_LONG = (
    "absolute-names acls add-file= after-date= anchored append atime-preserve?= auto-compress " + _BACKUP +
    " block-number blocking-factor= bzip2 catenate check-device check-links checkpoint?= *checkpoint-action= "
    "clamp-mtime compare compress concatenate confirmation create delay-directory-restore delete dereference diff "
    "*directory= exclude= exclude-backups exclude-caches exclude-caches-all exclude-caches-under exclude-from= "
    "exclude-ignore= exclude-ignore-recursive= exclude-tag= exclude-tag-all= exclude-tag-under= exclude-vcs "
    "exclude-vcs-ignores extract *file= files-from= force-local format= full-time get group= group-map= gunzip "
    "gzip hard-dereference hole-detection= ignore-case ignore-command-error ignore-failed-read ignore-zeros "
    "incremental *index-file= *info-script= interactive keep-directory-symlink keep-newer-files keep-old-files "
    "label= level= list >listed-incremental= lzip lzma lzop mode= mtime= multi-volume *new-volume-script= newer= "
    "newer-mtime= no-acls no-anchored no-auto-compress no-check-device no-delay-directory-restore no-ignore-case "
    "no-ignore-command-error no-null no-overwrite-dir no-quote-chars= no-recursion no-same-owner "
    "no-same-permissions no-seek no-selinux no-unquote no-verbatim-files-from no-wildcards no-wildcards-match-slash "
    "no-xattrs null numeric-owner occurrence?= old-archive one-file-system >one-top-level?= overwrite "
    "overwrite-dir owner= owner-map= pax-option= portability posix preserve-order preserve-permissions "
    "quote-chars= quoting-style= read-full-records record-size= recursion restrict *rmt-command= *rsh-command= "
    "same-order same-owner same-permissions seek selinux show-defaults show-omitted-dirs "
    "show-snapshot-field-ranges show-stored-names show-transformed-names skip-old-files sort= sparse "
    "sparse-version= starting-file= strip-components= tape-length= test-label *to-command= to-stdout totals?= "
    "touch transform= uncompress ungzip unquote update usage *use-compress-program= *compress-program= utc "
    "verbatim-files-from verbose verify >volno-file= warning= wildcards wildcards-match-slash xattrs "
    "xattrs-exclude= xattrs-include= xform= xz zstd" + _GNU)
_TAR_RISKY = {
    "--remove-files": "deletes the files it puts in the archive",
    "--recursive-unlink": "deletes whole directories that are in the way of what it extracts",
    "--unlink-first": "deletes each file before extracting over it",
    "-U": "deletes each file before extracting over it",
}
TAR = S("AcdrtuxGnSkWOmpsMBiajJzZhlRvwo? *P >g: *C: T: X: *f: *F: L: b: H: V: *I: K: N:", _TAR_LONG,
        risky=_TAR_RISKY, values=_SUFFIXES)
BSDTAR = S("AcdrtuxnSkWOmpqvwlLHPyYjJzZaio@ B: b: *C: *f: *I: T: X: s: *P",
           "absolute-paths acls b64encode check-links chroot clear-nochange-fflags *directory= disable-copyfile "
           "exclude= exclude-vcs fast-read fflags *file= files-from= format= gid= gname= gunzip gzip "
           "hfsCompression ignore-zeros include= insecure keep-newer-files keep-old-files lrzip lz4 lzip lzma lzop "
           "mac-metadata newer= newer-mtime= newer-than= newer-mtime-than= nodump no-acls no-fflags "
           "no-mac-metadata no-read-sparse no-recursion no-same-owner no-same-permissions no-safe-writes "
           "no-xattrs null numeric-owner older= older-mtime= older-than= older-mtime-than= one-file-system "
           "options= passphrase= posix preserve-permissions read-sparse safe-writes same-owner "
           "same-permissions strip-components= to-stdout totals uid= uname= use-compress-program= verbose "
           "xattrs xz zstd bzip2 bunzip2 compress uncompress extract list create append update" + _GNU,
           risky={**_TAR_RISKY, "--unlink": "deletes each file before extracting over it"})

ZIP = S("0123456789@AcdDeFfgJjklLmoqrSTuvVwXyz$ *-TT: -FF -FS -FI -MM -sf -so -su -sp -sb -sc -sv -ds: -dc -dd -dg "
        "-db -df -du -dv >-lf: -la -li -nw -ic -h2 -tt: -ll -AC -AS -UN: -DF -ws -fz -fd b: *O: n: i: x: t: U: P: "
        "s: Z:",
        "adjust-sfx append-output binary compression-method= copy-entries display-bytes display-counts "
        "display-dots display-globaldots display-usize display-volume dot-size= entry-comments exclude= fix "
        "fixfix fix-fix freshen from-crlf grow include= junk-paths junk-sfx latin1-comments lf-crlf "
        "library-compression log-append >logfile-path= log-info no-dir-entries no-extra no-wild "
        "*output-file= *out= password= quiet recurse-paths recurse-patterns show-command show-files "
        "show-unicode-files split-bell split-pause split-size= split-verbose suffixes= symlinks temp-path= test "
        "to-crlf translate-eol *unzip-command= update verbose version help wild-stop-dirs filesync "
        "must-match quiet-progress sf-pipe recurse latin1 sf",
        risky={"-m": "deletes the files it puts in the archive",
               "--move": "deletes the files it puts in the archive"})
UNZIP = S("ZlvtzTpcfunojCXKLMVWaAbBDqsU^ *d: x: O: I: P: N",
          "help version",
          risky={"-:": "extracts ../ paths outside the destination directory"})

_GZIP_LONG = ("best fast stdout to-stdout decompress uncompress force keep list license no-name name quiet "
              "recursive rsyncable suffix= synchronous test verbose" + _GNU)
GZIP = S("cdfhklLnNqrtvV0123456789 S:", _GZIP_LONG, values=_SUFFIXES)
PIGZ = S("cdfhklLnNqrtvVimMTRYzKAFU0123456789 S: b: p: C: A: H:",
         _GZIP_LONG + " blocksize= processes= independent zlib zip rle huffman alias= comment= first no-time "
         "iterations= maxsplits= oneblock", values=_SUFFIXES)
BZIP2 = S("cdzkfqtvsLVh0123456789", "decompress compress keep force test stdout quiet verbose license small fast "
          "best" + _GNU)
_XZ_LONG = ("compress decompress uncompress test list keep force stdout to-stdout suffix= files?= files0?= format= "
            "check= ignore-check extreme threads= block-size= block-list= flush-timeout= memlimit-compress= "
            "memlimit-decompress= memlimit-mt-decompress= memlimit= memory= no-adjust quiet verbose no-warn robot "
            "info-memory long-help single-stream no-sparse sensitive lzma1?= lzma2?= x86?= arm?= armthumb?= "
            "arm64?= powerpc?= ia64?= sparc?= riscv?= delta?=" + _GNU)
XZ = S("zdtlkfcqvhHVeQ0123456789 T: F: C: M: S:", _XZ_LONG, values=_SUFFIXES)
ZSTD = S("k#dfhHVcvqrlMbeiztT0123456789 *o: D: B: S",
         "adapt?= auto-threads= best check compress content-size decompress dictID= exclude-compressed fast?= "
         "filelist= force format= keep list long?= maxdict= memory= no-asyncio no-check no-content-size no-dictID "
         "no-progress no-row-match-finder no-sparse >output-dir-flat= >output-dir-mirror= pass-through "
         "patch-from= priority= progress quiet *rm row-match-finder rsyncable show-default-cparams single-thread "
         "size-hint= sparse stdout stream-size= target-compressed-block-size= test >trace= ultra uncompress "
         "verbose train train-cover?= train-fastcover?= train-legacy?=" + _GNU)
LZ4 = S("0123456789dzfkhHVvqctmrlBbeiS D:",
        "best content-size no-content-size fast?= favor-decSpeed frame-crc no-frame-crc list multiple *rm sparse "
        "no-sparse stdout to-stdout decompress uncompress compress force keep quiet verbose test" + _GNU)
BROTLI = S("cdf*jkntvVZ0123456789hw *o: q: w: S: D:",
           "best decompress force help keep *rm no-copy-stat *output= quality= stdout suffix= test verbose version "
           "large_window= lgwin= dictionary= squash",
           values=_SUFFIXES)
LZIP = S("cdfFhklmnqtvV0123456789 b: m: *o: s: S:", "best fast stdout decompress force keep list "
         "match-length= *output= quiet dictionary-size= volume-size= test verbose loose-trailing" + _GNU)
COMPRESS = S("cdfrvVkC b:", "help version")

RSYNC = S("vqcarRbudlLkKHpEAXogDtUNOJSnWxmIyzCF0s8hPi46V B: *e: @: >T: f:",
          "8-bit-output acls address= append append-verify archive atimes backup >backup-dir= block-size= "
          "blocking-io bwlimit= cc= checksum checksum-choice= checksum-seed= chmod= chown= compare-dest= compress "
          "compress-choice= compress-level= compress-threads= contimeout= copy-as= copy-dest= copy-devices "
          "copy-dirlinks copy-links copy-unsafe-links crtimes cvs-exclude debug= delay-updates devices dirs "
          "dry-run exclude= exclude-from= executability existing fake-super files-from= filter= from0 fsync "
          "fuzzy group groupmap= hard-links human-readable i-d i-r iconv= ignore-errors ignore-existing "
          "ignore-missing-args ignore-non-existing ignore-times inc-recursive include= include-from= info= "
          "inplace insecure-links ipv4 ipv6 itemize-changes keep-dirlinks link-dest= links list-only "
          "*log-file= log-file-format= max-alloc= max-size= min-size= mkpath modify-window= munge-links "
          "no-W no-i-r no-implied-dirs no-inc-recursive no-motd no-whole-file no-recursive no-r no-relative "
          "no-R no-dirs no-d no-perms no-p no-owner no-o no-group no-g no-times no-t no-devices no-specials no-D "
          "no-links no-l no-compress no-z no-human-readable no-h no-progress no-blocking-io no-8-bit-output "
          "numeric-ids old-args old-d old-dirs omit-dir-times omit-link-times one-file-system "
          "*only-write-batch= open-noatime out-format= outbuf= owner partial >partial-dir= password-file= perms "
          "port= preallocate progress protocol= prune-empty-dirs quiet read-batch= recursive relative *rsh= "
          "*rsync-path= safe-links secluded-args size-only skip-compress= sockopts= sparse specials stats "
          "stderr= stop-after= stop-at= suffix= super >temp-dir= timeout= times trust-sender update usermap= "
          "verbose whole-file *write-batch= write-devices xattrs zc= zl= filter-rules no-xattrs confine-root="
          + _GNU,
          risky={**{k: "deletes files at the destination" for k in (
              "--delete", "--del", "--delete-before", "--delete-during", "--delete-delay", "--delete-after",
              "--delete-excluded", "--delete-missing-args", "--max-delete", "--force")},
              "--remove-source-files": "deletes the files it copies", "--remove-sent-files": "deletes the files it "
                                                                                            "copies",
              "-M": "passes options to the other side's rsync", "--remote-option": "passes options to the other "
                                                                                   "side's rsync",
              "--daemon": "starts a server", "--config": "reads a daemon configuration",
              "--early-input": "sends a file to the other side's start-up"},
          values={"--suffix": PLAIN_SUFFIX})

CURL = S("aqfGgI0ik46jlLMnNZ#xpJ*ORSs231BvVh E: *K: C: b: *c: d: *D: F: P: H: m: *o: U: Q: r: e: X: Y: y: t: z: T: "
         "u: A: w:",
         "alt-svc= anyauth append aws-sigv4= basic cacert= capath= cert= cert-status cert-type= ciphers= compressed "
         "compressed-ssh *config= connect-timeout= connect-to= continue-at= cookie= *cookie-jar= create-dirs "
         "create-file-mode= crlf crlfile= curves= data= data-ascii= data-binary= data-raw= data-urlencode= "
         "delegation= digest disable disable-eprt disable-epsv disallow-username-in-url dns-interface= "
         "dns-ipv4-addr= dns-ipv6-addr= dns-servers= doh-cert-status doh-insecure doh-url= *dump-header= "
         "egd-file= etag-compare= *etag-save= expect100-timeout= fail fail-early fail-with-body false-start form= "
         "form-escape form-string= ftp-account= ftp-alternative-to-user= ftp-create-dirs ftp-method= ftp-pasv "
         "ftp-port= ftp-pret ftp-skip-pasv-ip ftp-ssl-ccc ftp-ssl-ccc-mode= ftp-ssl-control get globoff "
         "happy-eyeballs-timeout-ms= haproxy-protocol haproxy-clientip= head header= help?= hostpubmd5= "
         "hostpubsha256= *hsts= http0.9 http1.0 http1.1 http2 http2-prior-knowledge http3 http3-only "
         "ignore-content-length include insecure interface= ipv4 ipv6 json= junk-session-cookies keepalive-time= "
         "key= key-type= krb= *libcurl= limit-rate= list-only local-port= location location-trusted "
         "login-options= mail-auth= mail-from= mail-rcpt= mail-rcpt-allowfails manual max-filesize= max-redirs= "
         "max-time= metalink negotiate netrc netrc-file= netrc-optional next no-alpn no-buffer no-clobber "
         "no-keepalive no-npn no-progress-meter no-sessionid noproxy= ntlm ntlm-wb oauth2-bearer= *output= "
         "*output-dir= parallel parallel-immediate parallel-max= pass= path-as-is pinnedpubkey= post301 post302 "
         "post303 preproxy= progress-bar proto= proto-default= proto-redir= proxy= proxy-anyauth proxy-basic "
         "proxy-cacert= proxy-capath= proxy-cert= proxy-cert-type= proxy-ciphers= proxy-crlfile= proxy-digest "
         "proxy-header= proxy-insecure proxy-key= proxy-key-type= proxy-negotiate proxy-ntlm proxy-pass= "
         "proxy-pinnedpubkey= proxy-service-name= proxy-ssl-allow-beast proxy-ssl-auto-client-cert "
         "proxy-tls13-ciphers= proxy-tlsauthtype= proxy-tlspassword= proxy-tlsuser= proxy-tlsv1 proxy-user= "
         "proxy1.0= proxytunnel pubkey= quote= random-file= range= rate= raw referer= remote-header-name "
         "*remote-name *remote-name-all remote-time remove-on-error request= request-target= resolve= retry= "
         "retry-all-errors retry-connrefused retry-delay= retry-max-time= sasl-authzid= sasl-ir service-name= "
         "show-error silent socks4= socks4a= socks5= socks5-basic socks5-gssapi socks5-gssapi-nec "
         "socks5-gssapi-service= socks5-hostname= speed-limit= speed-time= ssl ssl-allow-beast "
         "ssl-auto-client-cert ssl-no-revoke ssl-reqd ssl-revoke-best-effort sslv2 sslv3 *stderr= styled-output "
         "suppress-connect-headers tcp-fastopen tcp-nodelay telnet-option= tftp-blksize= tftp-no-options "
         "time-cond= tls-max= tls13-ciphers= tlsauthtype= tlspassword= tlsuser= tlsv1 tlsv1.0 tlsv1.1 tlsv1.2 "
         "tlsv1.3 tr-encoding *trace= *trace-ascii= trace-time upload-file= url= url-query= use-ascii user= "
         "user-agent= verbose version write-out= xattr",
         risky={"--engine": "loads a crypto engine (a library)",
                "--unix-socket": "talks to a local service through its socket",
                "--abstract-unix-socket": "talks to a local service through its socket"},
         values={"-w": r"(?s)(?!.*%output\{).*", "--write-out": r"(?s)(?!.*%output\{).*"})
CURL_MARKS = frozenset({"-o", "-O", "-D", "-c", "-K"})  # acted on by cmd_curl
WGET = S("hVbdqvnFcNS*x46E*rkK*m*pHL *e: *o: *a: i: B: t: *O: T: w: Q: *P: U: l: A: R: D: I: X:",
         "accept-regex= accept= adjust-extension *append-output= ask-password auth-no-challenge background "
         "backup-converted backups= base= bind-address= body-data= body-file= ca-certificate= ca-directory= "
         "certificate-type= certificate= ciphers= compression= *config= connect-timeout= content-disposition "
         "content-on-error continue convert-file-only convert-links crl-file= cut-dirs= debug default-page= "
         "delete-after *directory-prefix= dns-timeout= domains= exclude-directories= exclude-domains= *execute= "
         "follow-ftp follow-tags= *force-directories force-html ftp-password= ftp-user= ftps-clear-data-connection "
         "ftps-fallback-to-ftp ftps-implicit ftps-resume-ssl header= >hsts-file= http-password= http-user= "
         "https-only ignore-case ignore-length ignore-tags= include-directories= inet4-only inet6-only input-file= "
         "keep-session-cookies level= limit-rate= load-cookies= local-encoding= max-redirect= method= *mirror "
         "no-cache no-check-certificate no-clobber no-config no-cookies no-directories no-dns-cache no-glob "
         "no-host-directories no-hsts no-http-keep-alive no-if-modified-since no-iri no-netrc no-parent "
         "no-passive-ftp no-proxy no-remove-listing no-use-server-timestamps no-verbose no-warc-compression "
         "no-warc-digests no-warc-keep-log *output-document= *output-file= *page-requisites password= "
         "pinnedpubkey= post-data= post-file= prefer-family= preserve-permissions private-key-type= private-key= "
         "progress= protocol-directories proxy-password= proxy-user= quiet quota= random-wait read-timeout= "
         "*recursive referer= regex-type= reject-regex= reject= >rejected-log= relative remote-encoding= "
         "report-speed= restrict-file-names= retr-symlinks retry-connrefused retry-on-http-error= >save-cookies= "
         "save-headers secure-protocol= server-response show-progress span-hosts spider start-pos= "
         "strict-comments timeout= timestamping tries= trust-server-names unlink *use-askpass= user-agent= user= "
         "verbose waitretry= wait= warc-cdx warc-dedup= >warc-file= warc-header= warc-max-size= >warc-tempdir= "
         "xattr" + _GNU)

FILES: dict[str, Spec] = {
    "rm": S("fiIrRdv", "force interactive?= one-file-system *no-preserve-root preserve-root?= recursive dir verbose"
            + _GNU),
    "unlink": S("", _GNU),
    "shred": S("fnuvxz n: s:", "force iterations= random-source= size= remove?= verbose exact zero" + _GNU),
    "cp": S("abdfHilLnPprRsTuvxZ *t: S:", _COPY_LONG, values=_SUFFIXES),
    "mv": S("bfinTuvZ *t: S:", _BACKUP + " context debug exchange force interactive no-clobber no-copy "
            "no-target-directory strip-trailing-slashes *target-directory= update?= verbose" + _GNU, values=_SUFFIXES),
    "install": S("bcCdDpsTvZ g: m: o: S: *t:", _BACKUP + " compare context?= debug directory group= mode= "
                 "no-target-directory owner= preserve-context preserve-timestamps strip !strip-program= "
                 "*target-directory= verbose" + _GNU, values=_SUFFIXES),
    "ln": S("bdFfiLnPrsTv S: *t:", _BACKUP + " directory force interactive logical no-dereference "
            "no-target-directory physical relative symbolic *target-directory= verbose" + _GNU, values=_SUFFIXES),
    "rmdir": S("pv", "ignore-fail-on-non-empty parents verbose" + _GNU),
    "mkdir": S("pvZ m:", "context?= mode= parents verbose" + _GNU),
    "touch": S("acfhm d: r: t:", "date= no-create no-dereference reference= time=" + _GNU),
    "mktemp": S("duqt *p:", "directory dry-run quiet suffix= *tmpdir?=" + _GNU),
    "truncate": S("co r: s:", "io-blocks no-create reference= size=" + _GNU),
    "tee": S("aip", "append ignore-interrupts output-error?=" + _GNU),
    # dd reads KEY=VALUE operands and find an expression: their rules check both against their own tables.
    "dd": S(free=True), "find": S(free=True),
    "chmod": S("cfvRrwxXstugoa,+=01234567", "changes *no-preserve-root preserve-root quiet recursive reference= "
               "silent verbose" + _GNU),
    "chown": S("cfvhRHLP", "changes dereference from= *no-preserve-root no-dereference preserve-root quiet "
               "recursive reference= silent verbose" + _GNU),
    "chgrp": S("cfvhRHLP", "changes dereference *no-preserve-root no-dereference preserve-root quiet recursive "
               "reference= silent verbose" + _GNU),
    "sed": S("nEersuzb *e: *f: l: *i::", "debug *expression= *file= follow-symlinks *in-place?= line-length= "
             "null-data zero-terminated posix quiet regexp-extended sandbox separate silent unbuffered binary"
             + _GNU, values={"-i": PLAIN_SUFFIX, "--in-place": PLAIN_SUFFIX}),
    "sort": S("bdfgiMhnRrVcCmsuz k: *o: S: t: T:",
              "batch-size= buffer-size= check?= *compress-program= debug dictionary-order field-separator= "
              "files0-from= general-numeric-sort human-numeric-sort ignore-case ignore-leading-blanks "
              "ignore-nonprinting key= merge month-sort numeric-sort *output= parallel= random-sort random-source= "
              "reverse sort= stable temporary-directory= unique version-sort zero-terminated" + _GNU),
    "uniq": S("cdDiuz f: s: w:", "all-repeated?= check-chars= count group?= ignore-case repeated skip-chars= "
              "skip-fields= unique zero-terminated" + _GNU, numbers=True),
    # xxd reads ``-cols 8`` and ``-c8`` alike: its rule parses it.
    "xxd": S(free=True),
    "split": S("dxeu a: b: C: l: n: t:", "additional-suffix= bytes= elide-empty-files *filter= hex-suffixes?= "
               "line-bytes= lines= number= numeric-suffixes?= separator= suffix-length= unbuffered verbose" + _GNU),
    "csplit": S("ksz b: f: n:", "digits= elide-empty-files keep-files prefix= quiet silent suffix-format= "
                "suppress-matched" + _GNU),
    "diff3": S("AeE3xXimaTv L:", "*diff-program= easy-only ed initial-tab label= merge overlap-only show-all "
               "show-overlap strip-trailing-cr text" + _GNU),
    "sdiff": S("iEZbWBalstdHv *o: I: w:", "*diff-program= expand-tabs ignore-all-space ignore-blank-lines ignore-case "
               "ignore-matching-lines= ignore-space-change ignore-tab-expansion ignore-trailing-space left-column "
               "minimal *output= speed-large-files strip-trailing-cr suppress-common-lines tabsize= text width="
               + _GNU),
    "patch": S("lcenuNREZTbtfsvC p: F: *i: *o: >r: *d: D: V: B: Y: z: g:",
               "backup backup-if-mismatch basename-prefix= binary check context *directory= dry-run ed "
               "follow-symlinks force forward fuzz= get= ifdef= ignore-whitespace *input= merge?= "
               "no-backup-if-mismatch normal *output= posix prefix= quiet quoting-style= read-only= "
               ">reject-file= reject-format= remove-empty-files reverse set-time set-utc silent strip= suffix= "
               "unified verbose version-control= batch" + _GNU,
               values={"-B": PLAIN_SUFFIX, "--prefix": PLAIN_SUFFIX, "-Y": PLAIN_SUFFIX,
                       "--basename-prefix": PLAIN_SUFFIX, "-z": PLAIN_SUFFIX, "--suffix": PLAIN_SUFFIX}),
    "tree": S("adlfxpugshDFvrtcUNQSnCAJXqi *o: L: P: I: H: T:",
              "noreport charset= filelimit= timefmt= du si prune dirsfirst filesfirst sort= matchdirs metafirst "
              "gitignore gitfile= ignore-case info infofile= fromfile fromtabfile fflinks nolinks inodes device "
              "hintro= houtro= condense= version help", risky={"-R": "writes an index file into every directory"}),
    "tar": TAR, "bsdtar": BSDTAR, "zip": ZIP, "unzip": UNZIP,
    "gzip": GZIP, "gunzip": GZIP, "pigz": PIGZ, "unpigz": PIGZ, "bzip2": BZIP2, "bunzip2": BZIP2,
    "xz": XZ, "unxz": XZ, "lzma": XZ, "unlzma": XZ, "zstd": ZSTD, "unzstd": ZSTD, "lz4": LZ4, "unlz4": LZ4,
    "brotli": BROTLI, "lzip": LZIP, "compress": COMPRESS, "uncompress": GZIP,
    "rsync": RSYNC, "curl": CURL, "wget": WGET,
}

# find's expression: each primary and how many words it takes (-exec and friends: up to ``;`` or ``+``).
FIND_PRIMARIES: dict[str, int] = {
    **dict.fromkeys(("-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
                     "-lname", "-ilname", "-type", "-xtype", "-size", "-perm", "-user", "-group", "-uid", "-gid",
                     "-links", "-inum", "-samefile", "-newer", "-anewer", "-cnewer", "-amin", "-cmin", "-mmin",
                     "-atime", "-ctime", "-mtime", "-used", "-fstype", "-context", "-maxdepth", "-mindepth",
                     "-regextype", "-files0-from", "-printf", "-D", "-O"), 1),
    **dict.fromkeys(("-print", "-print0", "-ls", "-prune", "-quit", "-empty", "-readable", "-writable",
                     "-executable", "-nouser", "-nogroup", "-true", "-false", "-depth", "-d", "-daystart",
                     "-follow", "-mount", "-xdev", "-noleaf", "-ignore_readdir_race", "-noignore_readdir_race",
                     "-warn", "-nowarn", "-not", "-and", "-or", "-a", "-o", "!", "(", ")", ",", "-help",
                     "--help", "-version", "--version", "-H", "-L", "-P"), 0),
}
# What the find rule acts on: running, deleting, writing a file.
FIND_RULED = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fls",
                        "-fprintf"})
DD_KEYS = frozenset({"if", "of", "bs", "ibs", "obs", "cbs", "skip", "seek", "iseek", "oseek", "count", "status",
                     "conv", "iflag", "oflag"})
XXD_OPTIONS = "abCeEhiuvprRdcglnos"  # xxd's option letters (the rest of the word may spell the long name)
XXD_VALUES = "cglnosR"


def newer_primary(word: str) -> bool:
    """``-newerXY`` takes one word."""
    return len(word) == 8 and word.startswith("-newer") and all(c in "amctB" for c in word[6:])
