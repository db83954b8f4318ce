
(function(){
  var items=[].slice.call(document.querySelectorAll('tbody.item'));
  var chips=[].slice.call(document.querySelectorAll('button.chip'));
  var search=document.getElementById('search'), shown=document.getElementById('shown');
  var verdict='', inRun=Number(shown.dataset.total), total=inRun;
  function apply(){
    var q=search.value.trim().toLowerCase(), n=0;
    items.forEach(function(t){
      var ok=(!verdict||t.dataset.verdict===verdict)&&(!q||t.dataset.search.indexOf(q)>=0);
      t.hidden=!ok; if(ok){n++;}
    });
    shown.textContent='showing '+n+' of '+items.length+(total>items.length?' listed ('+inRun+' in the run)':'');
  }
  chips.forEach(function(c){c.addEventListener('click',function(){
    verdict=c.dataset.verdict; inRun=Number(c.dataset.count);
    chips.forEach(function(o){o.setAttribute('aria-pressed',String(o===c));});
    apply();
  });});
  search.addEventListener('input',apply);
  items.forEach(function(t){t.querySelector('tr.row').addEventListener('click',function(){
    t.classList.toggle('open'); t.querySelector('tr.detail').hidden=!t.classList.contains('open');
  });});
  function all(open){items.forEach(function(t){t.classList.toggle('open',open);
    t.querySelector('tr.detail').hidden=!open;});}
  document.getElementById('expand').addEventListener('click',function(){all(true);});
  document.getElementById('collapse').addEventListener('click',function(){all(false);});
  [].slice.call(document.querySelectorAll('details.result')).forEach(function(d){
    d.addEventListener('toggle',function(){
      var pre=d.querySelector('pre');
      if(!d.open||pre.dataset.indented){return;}
      try{pre.textContent=JSON.stringify(JSON.parse(pre.textContent),null,2);}catch(e){}
      pre.dataset.indented='1';
    });
  });
  apply();
})();
